package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
)

func TestApplyEventKeepsTheDecidingEventsBounce(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)
	full := &domain.Bounce{SMTPCode: 452, EnhancedCode: "4.2.2", Category: "mailbox_full"}
	user := &domain.Bounce{SMTPCode: 550, EnhancedCode: "5.1.1", Category: "unknown_user"}
	bounced := func(id string, at time.Time, b *domain.Bounce) domain.Event {
		return domain.Event{EventID: id, Kind: domain.KindStatus, Status: domain.StatusBounced, BounceType: domain.BounceSoft, OccurredAt: at, Bounce: b}
	}

	next, res, changed, err := applyEvent(messageRow{}, bounced("e2", t0.Add(time.Minute), full), t0)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, domain.OutcomeMoved, res.Outcome)
	assert.Equal(t, *full, next.Bounce)

	// Stale: the row keeps the deciding event's details.
	stale, res, _, err := applyEvent(next, bounced("e1", t0, user), t0)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeStale, res.Outcome)
	assert.Equal(t, *full, stale.Bounce)

	// An engagement event changes the row but not its bounce.
	opened, _, changed, err := applyEvent(next, domain.Event{Kind: domain.KindOpened, OccurredAt: t0}, t0)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, *full, opened.Bounce)

	// A complaint decides now: it is no bounce.
	complained, _, _, err := applyEvent(next, domain.Event{EventID: "e3", Kind: domain.KindStatus, Status: domain.StatusComplained, OccurredAt: t0, Bounce: user}, t0)
	require.NoError(t, err)
	assert.Equal(t, domain.Bounce{}, complained.Bounce)
}

func TestBounceOfOnlyBouncesAndFailures(t *testing.T) {
	b := &domain.Bounce{SMTPCode: 421, Category: "temporary_failure"}
	for st, want := range map[domain.Status]*domain.Bounce{
		domain.StatusBounced: b, domain.StatusFailed: b, domain.StatusDeferred: nil, domain.StatusDelivered: nil,
	} {
		assert.Equal(t, want, BounceOf(domain.Event{Kind: domain.KindStatus, Status: st, Bounce: b}), st)
	}
	assert.Nil(t, BounceOf(domain.Event{Kind: domain.KindCorrection, Status: domain.StatusBounced, Bounce: b}))
	assert.Nil(t, BounceOf(domain.Event{Kind: domain.KindStatus, Status: domain.StatusBounced, Bounce: &domain.Bounce{}}))
}
