package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/event"
)

func TestApplyEventKeepsTheDecidingEventsBounce(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)
	full := &event.Bounce{SMTPCode: 452, EnhancedCode: "4.2.2", Category: "mailbox_full"}
	user := &event.Bounce{SMTPCode: 550, EnhancedCode: "5.1.1", Category: "unknown_user"}
	bounced := func(id string, at time.Time, b *event.Bounce) event.Event {
		return event.Event{EventID: id, Kind: event.KindStatus, Status: event.StatusBounced, BounceType: event.BounceSoft, OccurredAt: at, Bounce: b}
	}

	next, res, changed, err := applyEvent(messageRow{}, bounced("e2", t0.Add(time.Minute), full), t0)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, OutcomeMoved, res.Outcome)
	assert.Equal(t, *full, next.Bounce)

	// Stale: the row keeps the deciding event's details.
	stale, res, _, err := applyEvent(next, bounced("e1", t0, user), t0)
	require.NoError(t, err)
	assert.Equal(t, OutcomeStale, res.Outcome)
	assert.Equal(t, *full, stale.Bounce)

	// An engagement event changes the row but not its bounce.
	opened, _, changed, err := applyEvent(next, event.Event{Kind: event.KindOpened, OccurredAt: t0}, t0)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, *full, opened.Bounce)

	// A complaint decides now: it is no bounce.
	complained, _, _, err := applyEvent(next, event.Event{EventID: "e3", Kind: event.KindStatus, Status: event.StatusComplained, OccurredAt: t0, Bounce: user}, t0)
	require.NoError(t, err)
	assert.Equal(t, event.Bounce{}, complained.Bounce)
}

func TestBounceOfOnlyBouncesAndFailures(t *testing.T) {
	b := &event.Bounce{SMTPCode: 421, Category: "temporary_failure"}
	for st, want := range map[event.Status]*event.Bounce{
		event.StatusBounced: b, event.StatusFailed: b, event.StatusDeferred: nil, event.StatusDelivered: nil,
	} {
		assert.Equal(t, want, BounceOf(event.Event{Kind: event.KindStatus, Status: st, Bounce: b}), st)
	}
	assert.Nil(t, BounceOf(event.Event{Kind: event.KindCorrection, Status: event.StatusBounced, Bounce: b}))
	assert.Nil(t, BounceOf(event.Event{Kind: event.KindStatus, Status: event.StatusBounced, Bounce: &event.Bounce{}}))
}
