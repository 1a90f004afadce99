package precedence

import (
	"fmt"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
)

func state(m domain.MessageState) State {
	key := Key{Rank: m.OrderRank, EventID: m.OrderEventID}
	if m.OrderOccurredAt != nil {
		key.OccurredAt = m.OrderOccurredAt.UTC()
	}
	st := State{Status: m.Status, BounceType: m.BounceType, Key: key, Version: m.Version}
	if m.CorrectedAt != nil {
		st.CorrectedAt = m.CorrectedAt.UTC()
	}
	return st
}

// ApplyToMessage computes the message after ev and the outcome to record (its Suppressed is the
// suppressions' to say). It is pure so the decision can be tested without a database; now
// stands in for an engagement event that carries no time. changed reports whether the row must
// be written.
func ApplyToMessage(cur domain.MessageState, ev domain.Event, now time.Time) (next domain.MessageState, tr domain.ApplyResult, changed bool, err error) {
	next = cur
	seenAt := ev.OccurredAt
	if seenAt.IsZero() {
		seenAt = now
	}
	switch ev.Kind {
	case domain.KindStatus, domain.KindCorrection:
		r := Apply(state(cur), ev)
		switch {
		case r.Moved:
			tr.Outcome = domain.OutcomeMoved
		case r.Advanced:
			tr.Outcome = domain.OutcomeAdvanced
		default:
			tr.Outcome = domain.OutcomeStale
		}
		if r.Advanced {
			next.Status = r.Next.Status
			next.BounceType = r.Next.BounceType
			next.Version = r.Next.Version
			next.OrderRank = r.Next.Key.Rank
			next.OrderOccurredAt = timeOrNil(r.Next.Key.OccurredAt)
			next.OrderEventID = r.Next.Key.EventID
			next.CorrectedAt = timeOrNil(r.Next.CorrectedAt)
			next.Bounce = BounceKept(ev)
			changed = true
		}
	case domain.KindOpened:
		next.Opens++
		next.FirstOpenedAt = earliest(cur.FirstOpenedAt, seenAt)
		tr.Outcome, changed = domain.OutcomeCounted, true
	case domain.KindClicked:
		next.Clicks++
		next.FirstClickedAt = earliest(cur.FirstClickedAt, seenAt)
		tr.Outcome, changed = domain.OutcomeCounted, true
	case domain.KindUnsubscribed:
		next.Unsubscribed = true
		next.UnsubscribedAt = earliest(cur.UnsubscribedAt, seenAt)
		tr.Outcome, changed = domain.OutcomeFlagged, true
	default:
		return cur, domain.ApplyResult{}, false, fmt.Errorf("kind %q does not apply to a message", ev.Kind)
	}
	// Any event may be the first to name the recipient; the first one named is kept.
	if cur.Recipient == "" && ev.Recipient != "" {
		next.Recipient = ev.Recipient
		changed = true
	}
	tr.From = cur.Status
	tr.To = next.Status
	tr.BounceType = next.BounceType
	tr.Recipient = next.Recipient
	tr.Version = next.Version
	return next, tr, changed, nil
}

// BounceKept is the bounce details a message and its history keep of ev: those of a bounce or
// a failure (the zero Bounce for every other event, and for one whose provider said nothing). A
// deferral's reply says why mail is late, not why it failed, and must not count as a bounce
// category.
func BounceKept(ev domain.Event) domain.Bounce {
	if ev.Kind != domain.KindStatus || ev.Bounce == nil {
		return domain.Bounce{}
	}
	if ev.Status != domain.StatusBounced && ev.Status != domain.StatusFailed {
		return domain.Bounce{}
	}
	return *ev.Bounce
}

// earliest returns the earlier of an optional stored time and t: events can arrive out of
// order, and "first" means first in provider time, not arrival.
func earliest(stored *time.Time, t time.Time) *time.Time {
	if stored != nil && !stored.After(t) {
		return stored
	}
	return &t
}

// timeOrNil maps the zero time (no such event yet) to nil, as the row stores it.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// BounceOf is BounceKept as a message.status_changed to bounced or failed shows it: nil when the
// event carries no details.
func BounceOf(ev domain.Event) *domain.Bounce {
	b := BounceKept(ev)
	if b == (domain.Bounce{}) {
		return nil
	}
	return &b
}
