package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailhook/mailhook/internal/domain"
)

// IsUnavailable reports whether err says PostgreSQL could not be reached or could not take a
// write now, where a retry once it is back may succeed: a connection refused, lost or timed out,
// SQLSTATE class 08 (connection exception), 57P (operator intervention: shutdown, crash
// recovery, starting up), 53300 (too many connections), or 25006 (a read-only standby, as after
// a failover before the client follows the new primary). Anything else (a data refusal, a
// missing table, a bug) is not: accepting through Temporal would only postpone the same failure.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		c := pgErr.Code
		return len(c) == 5 && (c[:2] == "08" || c[:3] == "57P" || c == "53300" || c == "25006")
	}
	// A connection lost mid-statement (the server stopped or crashed under it) ends in EOF.
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	var opErr *net.OpError
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || errors.As(err, &opErr) ||
		pgconn.SafeToRetry(err)
}

// RecordAccepted stores an event accepted through Temporal (its run's first step): inserted
// under (provider, event_id) as the acceptance insert would have, and marked started, since
// the run storing it is its workflow. A row already there (accepted just before the outage, or a
// provider's retry accepted after it) is left as it is, and marked started if it still waited
// for one. duplicate reports that the event was recorded under the id an earlier version gave
// it (domain.Event.PriorEventID): it was processed under that key, and this run has nothing to
// do.
func (s *Events) RecordAccepted(ctx context.Context, ev domain.Event) (inserted, duplicate bool, err error) {
	row, err := NewInboxRow(ev)
	if err != nil {
		return false, false, err
	}
	if row.source == "" {
		// So the explorer can tell it (GET /v1/events?through_temporal=true).
		row.source = SourceTemporal
	}
	// Held an hour from the relays: this run marks the row started right after.
	ins, err := (&Inbox{s.db}).EnqueueRows(ctx, []InboxRow{row}, time.Hour)
	if err != nil {
		return false, false, fmt.Errorf("record accepted event: %w", err)
	}
	if !ins[0] {
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_events WHERE provider = $1 AND event_id = $2)`,
			ev.Provider, ev.EventID).Scan(&exists); err != nil {
			return false, false, fmt.Errorf("record accepted event: look up its row: %w", err)
		}
		if !exists {
			return false, true, nil
		}
	}
	if _, err := settleStarts(ctx, s.pool, []Settlement{{Provider: ev.Provider, EventID: ev.EventID, Then: MarkStarted}}, Backoff{}); err != nil {
		return false, false, fmt.Errorf("record accepted event: mark it started: %w", err)
	}
	return ins[0], false, nil
}
