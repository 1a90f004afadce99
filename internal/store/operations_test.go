package store_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/suppression"
)

func hardBounce(id, msg, to string, occurred time.Time) domain.Event {
	ev := statusEvent(id, msg, domain.StatusBounced, domain.BounceHard, occurred)
	ev.Recipient = to
	return ev
}

func correctionEvent(id, msg string, st domain.Status, occurred time.Time, actor, reason string) domain.Event {
	raw, _ := json.Marshal(domain.Correction{Status: st, Reason: reason, Actor: actor})
	return domain.Event{
		Provider: provider, EventID: id, Type: domain.CorrectionType, Kind: domain.KindCorrection,
		Status: st, MessageID: msg, OccurredAt: occurred, Raw: raw,
	}
}

// Two messages to the same recipient hard-bounce: the address is suppressed once, by the first
// event; the second only counts. Retries report what each event did the first time.
func TestSuppressionOnceForRepeatedHardBounces(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	first := hardBounce("e_bounce_1", "msg_1", "user@example.com", at(10))
	second := hardBounce("e_bounce_2", "msg_2", "USER@example.com", at(5))

	res, err := s.Events.ApplyStatus(ctx, first, rules)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeMoved, res.Outcome)
	assert.True(t, res.Suppressed, "the first hard bounce adds the address")

	res, err = s.Events.ApplyStatus(ctx, second, rules)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeMoved, res.Outcome, "the second message still moves")
	assert.False(t, res.Suppressed, "already suppressed")

	for _, retry := range []struct {
		ev   domain.Event
		want bool
	}{{first, true}, {second, false}, {first, true}} {
		res, err := s.Events.ApplyStatus(ctx, retry.ev, rules)
		require.NoError(t, err)
		assert.Equal(t, retry.want, res.Suppressed, "retry of %s", retry.ev.EventID)
	}

	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM suppressions`))
	sup, err := s.GetSuppression(ctx, "User@Example.com")
	require.NoError(t, err)
	assert.Equal(t, "user@example.com", sup.Address)
	assert.Equal(t, domain.ReasonHardBounce, sup.Reason)
	assert.Equal(t, provider, sup.Provider)
	assert.Equal(t, "e_bounce_1", sup.EventID)
	assert.Equal(t, "msg_1", sup.MessageID)
	assert.Equal(t, int64(2), sup.TimesSeen, "one per event, retries not counted")
	assert.True(t, sup.FirstSeen.Equal(at(5)), "first seen is the earliest in provider time")
	assert.True(t, sup.LastSeen.Equal(at(10)))

	// A complaint for the same address counts too, and keeps the first reason.
	complaint := statusEvent("e_complaint", "msg_3", domain.StatusComplained, "", at(20))
	complaint.Recipient = "user@example.com"
	res, err = s.Events.ApplyStatus(ctx, complaint, rules)
	require.NoError(t, err)
	assert.False(t, res.Suppressed)
	sup, err = s.GetSuppression(ctx, "user@example.com")
	require.NoError(t, err)
	assert.Equal(t, domain.ReasonHardBounce, sup.Reason)
	assert.Equal(t, "e_bounce_1", sup.EventID)
	assert.Equal(t, int64(3), sup.TimesSeen)
	assert.True(t, sup.LastSeen.Equal(at(20)))

	m, err := s.Messages.GetMessage(ctx, provider, "msg_1")
	require.NoError(t, err)
	require.Len(t, m.Events, 1)
	assert.True(t, m.Events[0].Suppressed, "the history says which event suppressed")
}

func TestStaleHardBounceStillSuppresses(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	// failed later at the same rank decides; the earlier hard bounce is stale for the message.
	_, err := s.Events.ApplyStatus(ctx, statusEvent("e_failed", "msg_1", domain.StatusFailed, "", at(20)), rules)
	require.NoError(t, err)
	res, err := s.Events.ApplyStatus(ctx, hardBounce("e_bounce", "msg_1", "late@example.com", at(10)), rules)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeStale, res.Outcome)
	assert.True(t, res.Suppressed, "a stale hard bounce still says the address is bad")

	sup, err := s.GetSuppression(ctx, "late@example.com")
	require.NoError(t, err)
	assert.Equal(t, "e_bounce", sup.EventID)
}

// Concurrent attempts of several events that suppress the same address: exactly one event
// reports Suppressed, every attempt of one event agrees, and the row counts each event once.
func TestSuppressionConcurrentEvents(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	var evs []domain.Event
	for i := range 5 {
		evs = append(evs, hardBounce(fmt.Sprintf("e_%d", i), fmt.Sprintf("msg_%d", i%2), "busy@example.com", at(i)))
	}
	const attempts = 4
	results := make([]domain.ApplyResult, len(evs)*attempts)
	errs := make([]error, len(results))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Go(func() {
			<-start
			results[i], errs[i] = s.Events.ApplyStatus(ctx, evs[i%len(evs)], rules)
		})
	}
	close(start)
	wg.Wait()
	suppressedBy := map[string]bool{}
	for i, res := range results {
		require.NoError(t, errs[i])
		id := evs[i%len(evs)].EventID
		if prev, ok := suppressedBy[id]; ok {
			assert.Equal(t, prev, res.Suppressed, "attempts of %s disagree", id)
		}
		suppressedBy[id] = res.Suppressed
	}
	n := 0
	for _, v := range suppressedBy {
		if v {
			n++
		}
	}
	assert.Equal(t, 1, n, "exactly one event suppressed the address: %v", suppressedBy)
	sup, err := s.GetSuppression(ctx, "busy@example.com")
	require.NoError(t, err)
	assert.Equal(t, int64(len(evs)), sup.TimesSeen)
	assert.True(t, suppressedBy[sup.EventID], "the row names the event that reported it")
}

func TestLiftSuppressionWritesAudit(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	_, err := s.Events.ApplyStatus(ctx, hardBounce("e_1", "msg_1", "lift@example.com", at(1)), rules)
	require.NoError(t, err)

	lift, err := s.Suppressions.LiftSuppression(ctx, "Lift@Example.com", "", "ops", "mailbox fixed, confirmed by phone")
	require.NoError(t, err)
	assert.NotZero(t, lift.ID)
	assert.Equal(t, "lift@example.com", lift.Address)
	assert.Equal(t, suppression.GlobalScope, lift.Scope, "no scope given: the global row")
	assert.Equal(t, domain.ReasonHardBounce, lift.Reason)
	assert.Equal(t, "e_1", lift.EventID)
	assert.Equal(t, "ops", lift.LiftedBy)
	assert.Equal(t, "mailbox fixed, confirmed by phone", lift.LiftReason)
	assert.False(t, lift.LiftedAt.IsZero())

	_, err = s.GetSuppression(ctx, "lift@example.com")
	assert.ErrorIs(t, err, domain.ErrNotFound)
	_, err = s.Suppressions.LiftSuppression(ctx, "lift@example.com", suppression.GlobalScope, "ops", "again")
	assert.ErrorIs(t, err, domain.ErrNotFound)

	var by, why, reason string
	require.NoError(t, s.Pool().QueryRow(ctx,
		`SELECT lifted_by, lift_reason, reason FROM suppression_lifts WHERE address = 'lift@example.com'`).Scan(&by, &why, &reason))
	assert.Equal(t, "ops", by)
	assert.Equal(t, "mailbox fixed, confirmed by phone", why)
	assert.Equal(t, domain.ReasonHardBounce, reason)
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM suppression_lifts`), "a lift of nothing writes no audit row")

	// A new hard bounce after the lift suppresses the address again, and says so.
	res, err := s.Events.ApplyStatus(ctx, hardBounce("e_2", "msg_2", "lift@example.com", at(2)), rules)
	require.NoError(t, err)
	assert.True(t, res.Suppressed)
}

func TestListSuppressionsPaging(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	for i, addr := range []string{"d@example.com", "a@example.com", "c@example.com", "b@example.com", "e@example.com"} {
		ev := hardBounce(fmt.Sprintf("e_%d", i), fmt.Sprintf("msg_%d", i), addr, at(i))
		if i%2 == 1 {
			ev = statusEvent(ev.EventID, ev.MessageID, domain.StatusComplained, "", at(i))
			ev.Recipient = addr
		}
		_, err := s.Events.ApplyStatus(ctx, ev, rules)
		require.NoError(t, err)
	}
	var got []string
	after := ""
	for {
		page, err := s.Suppressions.ListSuppressions(ctx, store.SuppressionFilter{After: after, Limit: 2})
		require.NoError(t, err)
		for _, p := range page {
			got = append(got, p.Address)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].Address
	}
	assert.Equal(t, []string{"a@example.com", "b@example.com", "c@example.com", "d@example.com", "e@example.com"}, got)

	complaints, err := s.Suppressions.ListSuppressions(ctx, store.SuppressionFilter{Reason: domain.ReasonComplaint, Limit: 10})
	require.NoError(t, err)
	require.Len(t, complaints, 2)
	assert.Equal(t, "a@example.com", complaints[0].Address)
	assert.Equal(t, "b@example.com", complaints[1].Address)

	_, err = s.Suppressions.ListSuppressions(ctx, store.SuppressionFilter{})
	assert.Error(t, err, "a zero limit is a caller bug")
}

func TestApplyCorrection(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	const msg = "msg_fix"
	bounce := statusEvent("e_bounce", msg, domain.StatusBounced, domain.BounceHard, at(20))
	for _, ev := range []domain.Event{statusEvent("e_delivered", msg, domain.StatusDelivered, "", at(10)), bounce} {
		_, err := s.Events.ApplyStatus(ctx, ev, rules)
		require.NoError(t, err)
	}

	// Nanoseconds on purpose: the store decides on microseconds, like everything it stores.
	fixAt := at(60).Add(1500 * time.Nanosecond)
	fix := correctionEvent("correction-1", msg, domain.StatusDelivered, fixAt, "ops", "the DSN was for another message")
	res, err := s.Events.ApplyStatus(ctx, fix, rules)
	require.NoError(t, err)
	want := domain.ApplyResult{Outcome: domain.OutcomeMoved, From: domain.StatusBounced, To: domain.StatusDelivered, Recipient: "to@example.com", Version: 3}
	assert.Equal(t, want, res, "a correction moves backwards, clears the bounce type, never suppresses")
	again, err := s.Events.ApplyStatus(ctx, fix, rules)
	require.NoError(t, err)
	assert.Equal(t, res, again, "a retried correction reports the first outcome")

	// The provider re-sends the bounce under a new id (same DSN, same time): stale.
	res, err = s.Events.ApplyStatus(ctx, statusEvent("e_bounce_resent", msg, domain.StatusBounced, domain.BounceHard, at(20)), rules)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeStale, res.Outcome)
	assert.Equal(t, domain.StatusDelivered, res.To)
	// A retry of the original bounce event returns what it did then.
	res, err = s.Events.ApplyStatus(ctx, bounce, rules)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeMoved, res.Outcome)
	assert.Equal(t, domain.StatusBounced, res.To)
	// An older correction processed late loses to the newer one.
	res, err = s.Events.ApplyStatus(ctx, correctionEvent("correction-0", msg, domain.StatusBounced, at(30), "ops", "older"), rules)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeStale, res.Outcome)

	m, err := s.Messages.GetMessage(ctx, provider, msg)
	require.NoError(t, err)
	assert.Equal(t, domain.StatusDelivered, m.Status)
	assert.Empty(t, m.BounceType)
	assert.Equal(t, int64(3), m.Version)
	require.NotNil(t, m.CorrectedAt)
	assert.True(t, m.CorrectedAt.Equal(fixAt.Truncate(time.Microsecond)), "corrected_at %v", m.CorrectedAt)
	byID := map[string]store.MessageEvent{}
	for _, e := range m.Events {
		byID[e.EventID] = e
	}
	c := byID["correction-1"]
	assert.Equal(t, domain.CorrectionType, c.Type)
	assert.Equal(t, "ops", c.Actor)
	assert.Equal(t, "the DSN was for another message", c.Note)
	assert.True(t, c.Moved)
	assert.Equal(t, domain.StatusBounced, c.From)
	assert.Equal(t, domain.StatusDelivered, c.To)
	assert.Empty(t, byID["e_bounce"].Actor, "provider events have no actor")

	// An event after the correction follows normal precedence.
	res, err = s.Events.ApplyStatus(ctx, statusEvent("e_complaint", msg, domain.StatusComplained, "", at(90)), rules)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeMoved, res.Outcome)
	assert.Equal(t, int64(4), res.Version)

	// The correction does not lift the suppression the bounce added: that is DELETE's job.
	_, err = s.GetSuppression(ctx, "to@example.com")
	assert.NoError(t, err)

	_, err = s.Events.ApplyStatus(ctx, correctionEvent("correction-bad", msg, "lost", at(100), "ops", "x"), rules)
	assert.Error(t, err, "a correction to an unknown status is refused")
}
