package precedence_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/precedence"
)

func TestApplyToMessageKeepsTheDecidingEventsBounce(t *testing.T) {
	full := &domain.Bounce{SMTPCode: 452, EnhancedCode: "4.2.2", Category: "mailbox_full"}
	user := &domain.Bounce{SMTPCode: 550, EnhancedCode: "5.1.1", Category: "unknown_user"}
	bounced := func(id string, at time.Time, b *domain.Bounce) domain.Event {
		return domain.Event{EventID: id, Kind: domain.KindStatus, Status: domain.StatusBounced, BounceType: domain.BounceSoft, OccurredAt: at, Bounce: b}
	}

	next, res, changed, err := precedence.ApplyToMessage(domain.MessageState{}, bounced("e2", t0.Add(time.Minute), full), t0)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, domain.OutcomeMoved, res.Outcome)
	assert.Equal(t, *full, next.Bounce)

	// Stale: the row keeps the deciding event's details.
	stale, res, _, err := precedence.ApplyToMessage(next, bounced("e1", t0, user), t0)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeStale, res.Outcome)
	assert.Equal(t, *full, stale.Bounce)

	// An engagement event changes the row but not its bounce.
	opened, _, changed, err := precedence.ApplyToMessage(next, domain.Event{Kind: domain.KindOpened, OccurredAt: t0}, t0)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, *full, opened.Bounce)

	// A complaint decides now: it is no bounce.
	complained, _, _, err := precedence.ApplyToMessage(next, domain.Event{EventID: "e3", Kind: domain.KindStatus, Status: domain.StatusComplained, OccurredAt: t0, Bounce: user}, t0)
	require.NoError(t, err)
	assert.Equal(t, domain.Bounce{}, complained.Bounce)
}

func TestApplyToMessageEngagementKeepsEarliestTime(t *testing.T) {
	t1 := time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)
	t0 := t1.Add(-time.Hour)
	now := t1.Add(time.Hour)

	row := domain.MessageState{Status: domain.StatusDelivered, Version: 1}
	next, res, changed, err := precedence.ApplyToMessage(row, domain.Event{Kind: domain.KindOpened, OccurredAt: t1}, now)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, domain.OutcomeCounted, res.Outcome)
	assert.Equal(t, domain.StatusDelivered, res.From)
	assert.Equal(t, domain.StatusDelivered, res.To)
	assert.Equal(t, int64(1), res.Version)
	assert.Equal(t, int64(1), next.Opens)
	assert.True(t, next.FirstOpenedAt.Equal(t1))

	// An older open arriving late moves "first opened" back.
	next, _, _, err = precedence.ApplyToMessage(next, domain.Event{Kind: domain.KindOpened, OccurredAt: t0}, now)
	require.NoError(t, err)
	assert.Equal(t, int64(2), next.Opens)
	assert.True(t, next.FirstOpenedAt.Equal(t0))

	// No provider time: fall back to now, which is later, so t0 stays.
	next, _, _, err = precedence.ApplyToMessage(next, domain.Event{Kind: domain.KindOpened}, now)
	require.NoError(t, err)
	assert.True(t, next.FirstOpenedAt.Equal(t0))
}

func TestApplyToMessageStaleWritesNothingUnlessRecipientLearnt(t *testing.T) {
	at := time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)
	row := domain.MessageState{Status: domain.StatusDelivered, OrderRank: 30, OrderOccurredAt: &at, OrderEventID: "b", Version: 1}
	old := domain.Event{Kind: domain.KindStatus, EventID: "a", Status: domain.StatusAccepted, OccurredAt: at}

	_, res, changed, err := precedence.ApplyToMessage(row, old, at)
	require.NoError(t, err)
	assert.False(t, changed)
	assert.Equal(t, domain.OutcomeStale, res.Outcome)

	old.Recipient = "to@example.com"
	next, res, changed, err := precedence.ApplyToMessage(row, old, at)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, domain.OutcomeStale, res.Outcome)
	assert.Equal(t, "to@example.com", next.Recipient)
	assert.Equal(t, "to@example.com", res.Recipient)
}

func TestApplyToMessageRejectsOtherKinds(t *testing.T) {
	for _, k := range []domain.Kind{domain.KindInbound, domain.KindUnknown, ""} {
		_, _, _, err := precedence.ApplyToMessage(domain.MessageState{}, domain.Event{Kind: k}, time.Now())
		assert.Error(t, err, "kind %q", k)
	}
}
