package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/mailhook/mailhook/internal/domain"
)

// RecordAcceptedName is the first step of a run started while PostgreSQL could not take its
// event (acceptance through Temporal).
const RecordAcceptedName = "RecordAccepted"

// ErrTypeNotStorable: PostgreSQL refuses the event's data; retrying cannot help.
const ErrTypeNotStorable = "NotStorable"

// RecordAcceptedOutput is what RecordAccepted found.
type RecordAcceptedOutput struct {
	// Inserted: the row is new. Otherwise it was there already (accepted before the outage, or
	// a provider's retry accepted after it), and the run goes on for it as any run does.
	Inserted bool `json:"inserted,omitempty"`
	// Duplicate: the event was recorded under the id an earlier version gave it; the run ends.
	Duplicate bool `json:"duplicate,omitempty"`
}

// RecordAccepted stores the event its run carries, as the acceptance insert would have. While
// PostgreSQL is down it waits for it (waitForPostgreSQL); scheduled by a run started before
// it waited (without a heartbeat timeout), it fails, and the run's retry policy spaces the
// attempts.
func (a *Activities) RecordAccepted(ctx context.Context, in domain.AcceptedEvent) (out RecordAcceptedOutput, err error) {
	err = a.waitForPostgreSQL(ctx, func(ctx context.Context) error {
		out, err = a.recordAccepted(ctx, in)
		return err
	})
	return out, err
}

func (a *Activities) recordAccepted(ctx context.Context, in domain.AcceptedEvent) (RecordAcceptedOutput, error) {
	ev := in.Event
	ev.PriorEventID = in.PriorEventID
	inserted, dup, err := a.Events.RecordAccepted(ctx, ev)
	if errors.Is(err, domain.ErrNotStorable) {
		a.logger(ctx, ev).ErrorContext(ctx, "PostgreSQL refuses an event accepted through Temporal; its run fails with the event in its input", "error", err)
		return RecordAcceptedOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("record: PostgreSQL refuses the event's data: %v", err), ErrTypeNotStorable, err)
	}
	if err != nil {
		return RecordAcceptedOutput{}, err
	}
	a.logger(ctx, ev).InfoContext(ctx, "event accepted through Temporal recorded", "inserted", inserted, "duplicate", dup)
	return RecordAcceptedOutput{Inserted: inserted, Duplicate: dup}, nil
}
