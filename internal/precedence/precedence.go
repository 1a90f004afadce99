// Package precedence decides what an event does to its message: whether it moves the status
// (Apply), and the whole row after it, engagement counts and flags included (ApplyToMessage). It
// is pure: the store calls it inside its transaction and tests call it directly.
package precedence

import (
	"time"

	"github.com/mailhook/mailhook/internal/domain"
)

// Rank orders statuses: a message only moves to a higher (rank, occurred_at, event_id).
// failed and bounced share a rank: both are terminal delivery failures, and the later one wins.
func Rank(s domain.Status) int {
	switch s {
	case domain.StatusAccepted:
		return 10
	case domain.StatusDeferred:
		return 20
	case domain.StatusDelivered:
		return 30
	case domain.StatusFailed, domain.StatusBounced:
		return 40
	case domain.StatusComplained:
		return 50
	default:
		return 0
	}
}

// Key is the order key of a status event: (rank, occurred_at, event_id).
type Key struct {
	Rank       int       `json:"rank"`
	OccurredAt time.Time `json:"occurred_at"`
	EventID    string    `json:"event_id"`
}

// KeyOf returns the order key of a status event.
func KeyOf(ev domain.Event) Key {
	return Key{Rank: Rank(ev.Status), OccurredAt: ev.OccurredAt.UTC(), EventID: ev.EventID}
}

// Less reports whether a orders before b. The zero Key orders before every real event.
func (a Key) Less(b Key) bool {
	if a.Rank != b.Rank {
		return a.Rank < b.Rank
	}
	if !a.OccurredAt.Equal(b.OccurredAt) {
		return a.OccurredAt.Before(b.OccurredAt)
	}
	return a.EventID < b.EventID
}

// State is the part of a message that precedence governs.
type State struct {
	Status     domain.Status `json:"status"`
	BounceType string        `json:"bounce_type,omitempty"`
	Key        Key           `json:"key"`
	// Version counts visible changes (status or bounce type), so a receiver can order updates.
	Version int64 `json:"version"`
	// CorrectedAt is the time of the latest operator correction applied (zero: none). A
	// provider status event that occurred at or before it is stale whatever its rank.
	CorrectedAt time.Time `json:"corrected_at,omitzero"`
}

// Result is what applying one status event did.
type Result struct {
	Next State
	// Advanced: the event's order key is the new maximum, so it is now the deciding event.
	Advanced bool
	// Moved: the visible state (status or bounce type) changed; this is what gets notified.
	Moved bool
}

// Apply folds one status event into the state. The stored state is always the one set by the
// event with the greatest order key, so the end state does not depend on arrival order. An
// event whose key is not greater is stale and changes nothing.
//
// A correction (domain.KindCorrection) is an operator's word and wins over precedence: see
// applyCorrection. After one, a status event that occurred at or before the correction is stale
// (a provider's retry of an old bounce cannot undo it); events that occurred after it follow
// the normal precedence, with the correction as the deciding event.
func Apply(cur State, ev domain.Event) Result {
	if ev.Kind == domain.KindCorrection {
		return applyCorrection(cur, ev)
	}
	k := KeyOf(ev)
	if k.Rank == 0 || !cur.Key.Less(k) {
		return Result{Next: cur}
	}
	if !cur.CorrectedAt.IsZero() && !k.OccurredAt.After(cur.CorrectedAt) {
		return Result{Next: cur}
	}
	next := cur
	next.Key = k
	next.Status = ev.Status
	next.BounceType = ev.BounceType
	return result(cur, next)
}

// applyCorrection sets the corrected status whatever the current key: the bounce type is
// cleared, the correction becomes the deciding event and CorrectedAt its time. Only a
// correction that is not later than the latest one already applied is stale, so when two
// corrections race the later one (in time) wins in either arrival order.
func applyCorrection(cur State, ev domain.Event) Result {
	k := KeyOf(ev)
	if k.Rank == 0 || (!cur.CorrectedAt.IsZero() && !k.OccurredAt.After(cur.CorrectedAt)) {
		return Result{Next: cur}
	}
	next := cur
	next.Key = k
	next.Status = ev.Status
	next.BounceType = ""
	next.CorrectedAt = k.OccurredAt
	return result(cur, next)
}

// result is an advance from cur to next; it is a move when the visible state changed.
func result(cur, next State) Result {
	moved := next.Status != cur.Status || next.BounceType != cur.BounceType
	if moved {
		next.Version++
	}
	return Result{Next: next, Advanced: true, Moved: moved}
}
