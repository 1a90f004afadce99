package store_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/suppression"
)

func bounceEvent(id, msg, recipient, bounceType string, occurred time.Time, b *domain.Bounce) domain.Event {
	ev := statusEvent(id, msg, domain.StatusBounced, bounceType, occurred)
	ev.Recipient = recipient
	ev.Bounce = b
	return ev
}

var (
	mailboxFull = &domain.Bounce{SMTPCode: 452, EnhancedCode: "4.2.2", Diagnostic: "452 4.2.2 Mailbox full", Category: "mailbox_full"}
	unknownUser = &domain.Bounce{SMTPCode: 550, EnhancedCode: "5.1.1", Diagnostic: "550 5.1.1 No such user", Category: "unknown_user"}
	spamBlock   = &domain.Bounce{SMTPCode: 554, EnhancedCode: "5.7.1", Diagnostic: "554 5.7.1 Message rejected as spam", Category: "spam_block"}
)

// The message shows the details of the event that decided its status, whatever the arrival
// order; each bounce keeps its own in the history, stale or not.
func TestBounceDetailsFollowTheDecidingEvent(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()

	soft := bounceEvent("evt_bd_soft", "msg_bd", "to@example.com", domain.BounceSoft, at(10), mailboxFull)
	hard := bounceEvent("evt_bd_hard", "msg_bd", "to@example.com", domain.BounceHard, at(20), unknownUser)
	failed := statusEvent("evt_bd_failed", "msg_bd", domain.StatusFailed, "", at(5))
	failed.Bounce = spamBlock
	delivered := statusEvent("evt_bd_delivered", "msg_bd", domain.StatusDelivered, "", at(1))
	delivered.Bounce = mailboxFull // a provider's text on a delivery is no bounce

	for _, ev := range []domain.Event{hard, delivered, soft, failed} {
		_, err := s.Events.ApplyStatus(ctx, ev, rules)
		require.NoError(t, err)
	}
	m, err := s.Messages.GetMessage(ctx, provider, "msg_bd")
	require.NoError(t, err)
	assert.Equal(t, domain.StatusBounced, m.Status)
	assert.Equal(t, domain.BounceHard, m.BounceType)
	assert.Equal(t, unknownUser, m.Bounce, "the latest bounce in provider time decided, though it arrived first")
	got := map[string]*domain.Bounce{}
	for _, e := range m.Events {
		got[e.EventID] = e.Bounce
	}
	assert.Equal(t, map[string]*domain.Bounce{
		"evt_bd_hard": unknownUser, "evt_bd_delivered": nil, "evt_bd_soft": mailboxFull, "evt_bd_failed": spamBlock,
	}, got, "each bounce and failure keeps its own details, stale ones too")

	// The same events in another order end in the same state.
	s2 := storetest.Open(t)
	for _, ev := range []domain.Event{soft, failed, delivered, hard} {
		_, err := s2.Events.ApplyStatus(ctx, ev, rules)
		require.NoError(t, err)
	}
	m2, err := s2.Messages.GetMessage(ctx, provider, "msg_bd")
	require.NoError(t, err)
	assert.Equal(t, m.Bounce, m2.Bounce)

	// A later bounce without details clears them: status and details describe one event.
	bare := bounceEvent("evt_bd_bare", "msg_bd", "to@example.com", domain.BounceHard, at(30), nil)
	res, err := s.Events.ApplyStatus(ctx, bare, rules)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeAdvanced, res.Outcome)
	m, err = s.Messages.GetMessage(ctx, provider, "msg_bd")
	require.NoError(t, err)
	assert.Nil(t, m.Bounce)

	// A correction to delivered shows no bounce either.
	late := bounceEvent("evt_bd_late", "msg_bd", "to@example.com", domain.BounceHard, at(40), unknownUser)
	_, err = s.Events.ApplyStatus(ctx, late, rules)
	require.NoError(t, err)
	m, err = s.Messages.GetMessage(ctx, provider, "msg_bd")
	require.NoError(t, err)
	assert.Equal(t, unknownUser, m.Bounce)
	corr := domain.Event{Provider: provider, EventID: "correction-bd", Type: domain.CorrectionType, Kind: domain.KindCorrection,
		Status: domain.StatusDelivered, MessageID: "msg_bd", OccurredAt: at(50), Raw: []byte(`{"status":"delivered","reason":"x","actor":"ops"}`)}
	_, err = s.Events.ApplyStatus(ctx, corr, rules)
	require.NoError(t, err)
	m, err = s.Messages.GetMessage(ctx, provider, "msg_bd")
	require.NoError(t, err)
	assert.Equal(t, domain.StatusDelivered, m.Status)
	assert.Nil(t, m.Bounce)
}

func TestStorableBounce(t *testing.T) {
	ok := statusEvent("evt_sb", "msg_sb", domain.StatusBounced, domain.BounceHard, at(0))
	ok.Bounce = &domain.Bounce{SMTPCode: 550, EnhancedCode: "5.1.1", Diagnostic: strings.Repeat("é", domain.MaxDiagnosticBytes/2), Category: "unknown_user"}
	require.NoError(t, store.Storable(ok))
	ok.Bounce = &domain.Bounce{Diagnostic: "no code, no category"}
	require.NoError(t, store.Storable(ok))
	for _, c := range bounce.Categories {
		ok.Bounce = &domain.Bounce{Category: c}
		require.NoError(t, store.Storable(ok), c)
	}

	for name, b := range map[string]domain.Bounce{
		"diagnostic too long":       {Diagnostic: strings.Repeat("x", domain.MaxDiagnosticBytes+1)},
		"diagnostic NUL":            {Diagnostic: "550\x00"},
		"diagnostic invalid UTF-8":  {Diagnostic: "550 \xff"},
		"enhanced code too long":    {EnhancedCode: strings.Repeat("5.1", 10)},
		"enhanced code NUL":         {EnhancedCode: "5.1.1\x00"},
		"enhanced code not UTF-8":   {EnhancedCode: "5.\xc3"},
		"unknown category":          {Category: "bad_luck"},
		"category NUL":              {Category: "unknown_user\x00"},
		"smtp code beyond 3 digits": {SMTPCode: 5500},
		"negative smtp code":        {SMTPCode: -1},
	} {
		ev := ok
		ev.Bounce = &b
		err := store.Storable(ev)
		assert.ErrorIs(t, err, domain.ErrNotStorable, name)
	}
}

// softBounces applies n soft bounces for address, one message each, spaced by step.
func softBounces(t *testing.T, s *store.Store, rules domain.Rules, prefix, address string, from time.Time, step time.Duration, n int) []domain.ApplyResult {
	t.Helper()
	var out []domain.ApplyResult
	for i := range n {
		ev := bounceEvent(fmt.Sprintf("%s_%d", prefix, i), fmt.Sprintf("msg_%s_%d", prefix, i), address,
			domain.BounceSoft, from.Add(time.Duration(i)*step), mailboxFull)
		res, err := s.Events.ApplyStatus(t.Context(), ev, rules)
		require.NoError(t, err)
		out = append(out, res)
	}
	return out
}

func TestSoftBounceEscalation(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	rules := apply.Rules{Escalation: suppression.SoftBounce{Count: 3, Within: 24 * time.Hour}}
	ctx := t.Context()

	// Two within the window: not yet.
	res := softBounces(t, s, rules, "sb_a", "Soft@Example.com", at(0), time.Hour, 2)
	assert.False(t, res[0].Suppressed || res[1].Suppressed)
	_, err := s.GetSuppression(ctx, "soft@example.com")
	require.ErrorIs(t, err, domain.ErrNotFound)

	// The third suppresses, globally, as the soft-bounce threshold; its history says so.
	res = softBounces(t, s, rules, "sb_b", "soft@example.com", at(0).Add(3*time.Hour), time.Hour, 2)
	assert.True(t, res[0].Suppressed, "the third soft bounce within 24h")
	assert.False(t, res[1].Suppressed, "the fourth only counts")
	sup, err := s.GetSuppression(ctx, "soft@example.com")
	require.NoError(t, err)
	assert.Equal(t, domain.ReasonSoftBounceThreshold, sup.Reason)
	assert.Equal(t, suppression.GlobalScope, sup.Scope)
	assert.Equal(t, "sb_b_0", sup.EventID)
	assert.Equal(t, int64(2), sup.TimesSeen)
	m, err := s.Messages.GetMessage(ctx, provider, "msg_sb_b_0")
	require.NoError(t, err)
	require.Len(t, m.Events, 1)
	assert.True(t, m.Events[0].Suppressed)

	// A retry reports what the first attempt did.
	again, err := s.Events.ApplyStatus(ctx, bounceEvent("sb_b_0", "msg_sb_b_0", "soft@example.com", domain.BounceSoft, at(0).Add(3*time.Hour), mailboxFull), rules)
	require.NoError(t, err)
	assert.True(t, again.Suppressed)
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM soft_bounces WHERE event_id = 'sb_b_0'`))

	// Spread wider than the window: never three within 24h.
	res = softBounces(t, s, rules, "sb_w", "wide@example.com", at(0), 13*time.Hour, 5)
	for i, r := range res {
		assert.False(t, r.Suppressed, "bounce %d", i)
	}
	// A late delivery that lands between two bounces completes a set within 24h, though it is
	// not the latest of them.
	late := bounceEvent("sb_w_late", "msg_sb_w_late", "wide@example.com", domain.BounceSoft, at(0).Add(20*time.Hour), mailboxFull)
	r, err := s.Events.ApplyStatus(ctx, late, rules)
	require.NoError(t, err)
	assert.True(t, r.Suppressed)

	// A hard bounce's suppression stays what it is: the threshold only counts on it.
	_, err = s.Events.ApplyStatus(ctx, bounceEvent("sb_h", "msg_sb_h", "hard@example.com", domain.BounceHard, at(0), unknownUser), rules)
	require.NoError(t, err)
	res = softBounces(t, s, rules, "sb_hs", "hard@example.com", at(1), time.Minute, 3)
	assert.False(t, res[2].Suppressed, "already suppressed")
	sup, err = s.GetSuppression(ctx, "hard@example.com")
	require.NoError(t, err)
	assert.Equal(t, domain.ReasonHardBounce, sup.Reason)
	assert.Equal(t, int64(2), sup.TimesSeen)

	// A soft bounce with no recipient anywhere counts for nobody.
	noone := bounceEvent("sb_none", "msg_sb_none", "", domain.BounceSoft, at(0), nil)
	_, err = s.Events.ApplyStatus(ctx, noone, rules)
	require.NoError(t, err)
	assert.Equal(t, 0, countRows(t, s, `SELECT count(*) FROM soft_bounces WHERE event_id = 'sb_none'`))
}

// Lifting the suppression gives the address a fresh start: the bounces before the lift no
// longer count.
func TestSoftBounceCountRestartsAfterALift(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	rules := apply.Rules{Escalation: suppression.SoftBounce{Count: 2, Within: time.Hour}}
	ctx := t.Context()
	// The lift is stamped by the database clock; the bounces happen around it.
	start := time.Now().Add(-10 * time.Minute)
	res := softBounces(t, s, rules, "lf_a", "lift@example.com", start, time.Minute, 2)
	require.True(t, res[1].Suppressed)
	_, err := s.Suppressions.LiftSuppression(ctx, "lift@example.com", suppression.GlobalScope, "ops", "mailbox fixed")
	require.NoError(t, err)

	res = softBounces(t, s, rules, "lf_b", "lift@example.com", time.Now().Add(time.Second), time.Second, 2)
	assert.False(t, res[0].Suppressed, "one bounce since the lift, though three within the hour")
	assert.True(t, res[1].Suppressed, "the second since the lift")
	sup, err := s.GetSuppression(ctx, "lift@example.com")
	require.NoError(t, err)
	assert.Equal(t, "lf_b_1", sup.EventID)
}

func TestSoftBounceEscalationOff(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	res := softBounces(t, s, rules, "off", "off@example.com", at(0), time.Second, 5)
	for _, r := range res {
		assert.False(t, r.Suppressed)
	}
	assert.Equal(t, 0, countRows(t, s, `SELECT count(*) FROM soft_bounces`), "nothing recorded while off")
	assert.Equal(t, 0, countRows(t, s, `SELECT count(*) FROM suppressions`))
}

// Soft bounces of one address applied at once, each for a message of its own (so no message
// lock orders them), each count once and the threshold suppresses exactly once: one
// suppression row, one event that reports it added it (one suppression.added), and every later
// bounce at or past the threshold in times_seen. The Process path is the activity's.
func TestSoftBounceEscalationConcurrent(t *testing.T) {
	t.Parallel()
	const count, n = 3, 12
	s := storetest.Open(t)
	rules := apply.Rules{Escalation: suppression.SoftBounce{Count: count, Within: time.Hour}}
	ctx := t.Context()

	evs := make([]domain.Event, n)
	for i := range evs {
		// Different spellings of one address: one suppressions key.
		addr := "Busy@Example.com"
		if i%2 == 1 {
			addr = " busy@example.COM"
		}
		evs[i] = bounceEvent(fmt.Sprintf("cc_%d", i), fmt.Sprintf("msg_cc_%d", i), addr, domain.BounceSoft, at(i), mailboxFull)
		_, err := s.Events.RecordEvent(ctx, evs[i])
		require.NoError(t, err)
	}

	results := make([]domain.ProcessResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range evs {
		wg.Go(func() {
			<-start
			// notify says a suppression.added is due when the event suppressed, as the activity's
			// callback does: such an event stays unprocessed until it is sent.
			results[i], errs[i] = s.Events.Process(ctx, provider, evs[i].EventID, false, notifying{rules, func(_ domain.Event, r domain.ApplyResult, applied bool) bool { return applied && r.Suppressed }})
		})
	}
	close(start)
	wg.Wait()

	var suppressing []string
	for i, r := range results {
		require.NoError(t, errs[i])
		require.True(t, r.Applied)
		if r.Apply.Suppressed {
			suppressing = append(suppressing, evs[i].EventID)
		}
	}
	require.Len(t, suppressing, 1, "exactly one event added the suppression")
	assert.Equal(t, n, countRows(t, s, `SELECT count(*) FROM soft_bounces WHERE address = 'busy@example.com'`), "each bounce counted once")
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM suppressions WHERE address = 'busy@example.com'`))
	sup, err := s.GetSuppression(ctx, "busy@example.com")
	require.NoError(t, err)
	assert.Equal(t, domain.ReasonSoftBounceThreshold, sup.Reason)
	assert.Equal(t, suppressing[0], sup.EventID)
	assert.Equal(t, int64(n-count+1), sup.TimesSeen, "the bounces from the threshold on")
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM message_events WHERE suppressed`))

	// Retries, concurrent too, report the first outcome and count nothing again.
	for i := range evs {
		wg.Go(func() {
			r, err := s.Events.Process(ctx, provider, evs[i].EventID, false, notifying{rules, func(_ domain.Event, r domain.ApplyResult, applied bool) bool { return applied && r.Suppressed }})
			if assert.NoError(t, err) && !results[i].Processed {
				assert.Equal(t, results[i].Apply, r.Apply)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, n, countRows(t, s, `SELECT count(*) FROM soft_bounces`))
	sup, err = s.GetSuppression(ctx, "busy@example.com")
	require.NoError(t, err)
	assert.Equal(t, int64(n-count+1), sup.TimesSeen)

	// The notification names what the store did.
	ev, res, applied, err := s.Events.StoredEvent(ctx, provider, suppressing[0])
	require.NoError(t, err)
	require.True(t, applied && res.Suppressed)
	address, reason, scope, ok := suppression.Added(ev, res.Recipient, nil)
	require.True(t, ok)
	assert.Equal(t, []string{"busy@example.com", domain.ReasonSoftBounceThreshold, suppression.GlobalScope},
		[]string{address, reason, scope})
}

func TestDailyBounceCategories(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	today := time.Now().UTC()
	yesterday := today.AddDate(0, 0, -1)

	apply := func(ev domain.Event, receivedAt time.Time) {
		t.Helper()
		recordAt(t, s, ev, receivedAt, false)
		_, err := s.Events.ApplyStatus(ctx, ev, rules)
		require.NoError(t, err)
	}
	apply(bounceEvent("dc_1", "msg_dc_1", "a@example.com", domain.BounceHard, at(0), unknownUser), today)
	apply(bounceEvent("dc_2", "msg_dc_2", "b@example.com", domain.BounceHard, at(0), unknownUser), today)
	apply(bounceEvent("dc_3", "msg_dc_3", "c@example.com", domain.BounceSoft, at(0), mailboxFull), today)
	apply(bounceEvent("dc_4", "msg_dc_4", "d@example.com", domain.BounceHard, at(0), nil), today)                           // no details
	apply(bounceEvent("dc_5", "msg_dc_5", "e@example.com", domain.BounceHard, at(0), &domain.Bounce{SMTPCode: 550}), today) // no category
	failed := statusEvent("dc_6", "msg_dc_6", domain.StatusFailed, "", at(0))
	failed.Bounce = spamBlock
	apply(failed, today)
	other := bounceEvent("dc_7", "msg_dc_7", "f@example.com", domain.BounceHard, at(0), unknownUser)
	other.Provider = "sendgrid"
	apply(other, today)
	// Received yesterday, applied today: yesterday's, as the day's counts have it.
	apply(bounceEvent("dc_8", "msg_dc_8", "g@example.com", domain.BounceHard, at(0), unknownUser), yesterday)

	got, err := s.Counts.DailyBounceCategories(ctx, today, "")
	require.NoError(t, err)
	assert.Equal(t, []store.BounceCategoryCount{
		{Provider: provider, EventType: "email.bounced", Category: "mailbox_full", Count: 1},
		{Provider: provider, EventType: "email.bounced", Category: "unknown_user", Count: 2},
		{Provider: provider, EventType: "email.failed", Category: "spam_block", Count: 1},
		{Provider: "sendgrid", EventType: "email.bounced", Category: "unknown_user", Count: 1},
	}, got)

	got, err = s.Counts.DailyBounceCategories(ctx, today, "sendgrid")
	require.NoError(t, err)
	assert.Equal(t, []store.BounceCategoryCount{{Provider: "sendgrid", EventType: "email.bounced", Category: "unknown_user", Count: 1}}, got)

	got, err = s.Counts.DailyBounceCategories(ctx, yesterday, "")
	require.NoError(t, err)
	assert.Equal(t, []store.BounceCategoryCount{{Provider: provider, EventType: "email.bounced", Category: "unknown_user", Count: 1}}, got)

	got, err = s.Counts.DailyBounceCategories(ctx, today.AddDate(0, 0, -30), "")
	require.NoError(t, err)
	assert.Empty(t, got)
}
