package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

const provider = "resend"

var base = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }

func statusEvent(id, msg string, st domain.Status, bounce string, occurred time.Time) domain.Event {
	return domain.Event{
		Provider:   provider,
		EventID:    id,
		Type:       "email." + string(st),
		Kind:       domain.KindStatus,
		Status:     st,
		BounceType: bounce,
		MessageID:  msg,
		Recipient:  "to@example.com",
		OccurredAt: occurred,
		Raw:        json.RawMessage(fmt.Sprintf(`{"id":%q,"type":"email.%s"}`, id, st)),
	}
}

func kindEvent(id, msg string, kind domain.Kind, occurred time.Time) domain.Event {
	return domain.Event{
		Provider: provider, EventID: id, Type: "email." + string(kind), Kind: kind,
		MessageID: msg, OccurredAt: occurred,
	}
}

func countRows(t *testing.T, s *store.Store, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, s.Pool().QueryRow(t.Context(), query, args...).Scan(&n))
	return n
}

func TestMigrateTwiceIsNoop(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	s, err := store.Open(t.Context(), dbURL, store.Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Ping(t.Context()))

	const q = `SELECT count(*) FROM goose_db_version`
	before := countRows(t, s, q)
	require.NoError(t, store.Migrate(t.Context(), dbURL))
	assert.Equal(t, before, countRows(t, s, q))
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewEmptyDatabase(t)

	// Two replicas starting at once must not both run the DDL.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = store.Migrate(t.Context(), dbURL) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}

	s, err := store.Open(t.Context(), dbURL, store.Options{})
	require.NoError(t, err)
	defer s.Close()
	// Version 0 (goose's own) plus one row per migration, file or Go, each recorded once.
	files, err := filepath.Glob("migrations/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	assert.Equal(t, len(files)+store.GoMigrations+1, countRows(t, s, `SELECT count(*) FROM goose_db_version`))
	for _, f := range files {
		// Versions are the files' numbers, which may have gaps (one taken by work not merged yet).
		var v int
		_, err := fmt.Sscanf(filepath.Base(f), "%05d_", &v)
		require.NoError(t, err, f)
		assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM goose_db_version WHERE version_id = $1`, v), "version %d", v)
	}
	assert.Equal(t, 8, countRows(t, s, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = 'public' AND table_name IN ('webhook_events','messages','message_events','notifications',
		                                               'suppressions','suppression_lifts','daily_counts','replays')`))
}

// database.url may carry pgx's pool settings (pool_max_conns sizes the pool, docs/operations/pgbouncer.md),
// and migrate runs on it when listen_url is unset. They are pgx's: sent to PostgreSQL as
// run-time parameters, it refuses the connection ("unrecognized configuration parameter").
func TestMigrateTakesPoolSettingsInTheURL(t *testing.T) {
	t.Parallel()
	dbURL, err := storetest.WithParam(storetest.NewEmptyDatabase(t), "pool_max_conns", "2")
	require.NoError(t, err)
	dbURL, err = storetest.WithParam(dbURL, "pool_max_conn_lifetime", "1h")
	require.NoError(t, err)
	require.NoError(t, store.Migrate(t.Context(), dbURL))
}

func TestOpenRejectsUnreachableDatabase(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Port 1 is never PostgreSQL: Open must fail at once rather than hand out a dead pool.
	_, err := store.Open(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", store.Options{})
	assert.Error(t, err)
}

func TestRecordEvent(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	ev := statusEvent("evt_1", "msg_1", domain.StatusDelivered, "", at(0))

	res, err := s.Events.RecordEvent(ctx, ev)
	require.NoError(t, err)
	assert.Equal(t, domain.RecordResult{Inserted: true}, res)

	res, err = s.Events.RecordEvent(ctx, ev)
	require.NoError(t, err)
	assert.Equal(t, domain.RecordResult{}, res, "duplicate while the first is still processing")

	require.NoError(t, s.Events.MarkProcessed(ctx, provider, ev.EventID))
	require.NoError(t, s.Events.MarkProcessed(ctx, provider, ev.EventID), "marking twice is fine")

	res, err = s.Events.RecordEvent(ctx, ev)
	require.NoError(t, err)
	assert.Equal(t, domain.RecordResult{AlreadyProcessed: true}, res)

	var (
		typ, msg   string
		occurred   time.Time
		payloadEq  bool
		processed  bool
		receivedOK bool
	)
	require.NoError(t, s.Pool().QueryRow(ctx, `
		SELECT w.event_type, w.message_id, w.occurred_at, p.payload = $3::jsonb, w.processed_at IS NOT NULL,
		       w.received_at <= w.processed_at
		FROM webhook_events w JOIN event_payloads p USING (provider, event_id, received_at)
		WHERE provider = $1 AND event_id = $2`,
		provider, ev.EventID, string(ev.Raw),
	).Scan(&typ, &msg, &occurred, &payloadEq, &processed, &receivedOK))
	assert.Equal(t, "email.delivered", typ)
	assert.Equal(t, "msg_1", msg)
	assert.True(t, occurred.Equal(ev.OccurredAt))
	assert.True(t, payloadEq, "payload is the provider's raw JSON")
	assert.True(t, processed)
	assert.True(t, receivedOK)
}

func TestRecordEventWithoutRawOrMessage(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	ev := domain.Event{Provider: provider, EventID: "evt_inbound", Type: "email.received", Kind: domain.KindInbound}

	res, err := s.Events.RecordEvent(ctx, ev)
	require.NoError(t, err)
	assert.True(t, res.Inserted)

	var (
		msg         *string
		occurred    *time.Time
		eventID     string
		payloadNull bool
	)
	require.NoError(t, s.Pool().QueryRow(ctx, `
		SELECT w.message_id, w.occurred_at, p.event->>'event_id', p.payload = 'null'::jsonb
		FROM webhook_events w JOIN event_payloads p USING (provider, event_id, received_at)
		WHERE provider = $1 AND event_id = $2`, provider, ev.EventID,
	).Scan(&msg, &occurred, &eventID, &payloadNull))
	assert.Nil(t, msg)
	assert.Nil(t, occurred)
	assert.Equal(t, "evt_inbound", eventID, "the normalized event is stored")
	assert.True(t, payloadNull, "without raw JSON the payload is JSON null, not a second copy of the event")
	back, _, _, err := s.Events.StoredEvent(ctx, provider, ev.EventID)
	require.NoError(t, err)
	assert.Nil(t, back.Raw)
	assert.Equal(t, "email.received", back.Type)
}

func TestRecordEventConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ev := statusEvent("evt_dup", "msg_1", domain.StatusDelivered, "", at(0))

	const n = 20
	results := make([]domain.RecordResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = s.Events.RecordEvent(t.Context(), ev)
		})
	}
	close(start)
	wg.Wait()

	inserted := 0
	for i := range n {
		require.NoError(t, errs[i])
		if results[i].Inserted {
			inserted++
		}
		assert.False(t, results[i].AlreadyProcessed)
	}
	assert.Equal(t, 1, inserted)
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events`))
}

func TestMarkProcessedUnknownEvent(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	err := s.Events.MarkProcessed(t.Context(), provider, "nope")
	assert.ErrorIs(t, err, domain.ErrNotFound)
	assert.ErrorContains(t, err, "resend:nope")
}

func TestApplyStatusRetryReturnsFirstOutcome(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	delivered := statusEvent("evt_delivered", "msg_1", domain.StatusDelivered, "", at(10))

	first, err := s.Events.ApplyStatus(ctx, delivered, rules)
	require.NoError(t, err)
	want := domain.ApplyResult{
		Outcome: domain.OutcomeMoved, From: domain.StatusNone, To: domain.StatusDelivered,
		Recipient: "to@example.com", Version: 1,
	}
	assert.Equal(t, want, first)

	retry, err := s.Events.ApplyStatus(ctx, delivered, rules)
	require.NoError(t, err)
	assert.Equal(t, first, retry)

	// The message moves on; a late retry of the first event still reports what it did then.
	bounced := statusEvent("evt_bounced", "msg_1", domain.StatusBounced, domain.BounceHard, at(20))
	_, err = s.Events.ApplyStatus(ctx, bounced, rules)
	require.NoError(t, err)
	retry, err = s.Events.ApplyStatus(ctx, delivered, rules)
	require.NoError(t, err)
	assert.Equal(t, first, retry)

	m, err := s.Messages.GetMessage(ctx, provider, "msg_1")
	require.NoError(t, err)
	assert.Equal(t, domain.StatusBounced, m.Status)
	assert.Equal(t, int64(2), m.Version)
	assert.Len(t, m.Events, 2, "a retry adds no history")

	// The state alone (the console's message page, beside its paged timeline) is the same state.
	state, err := s.Messages.GetMessageState(ctx, provider, "msg_1")
	require.NoError(t, err)
	m.Events, m.Notifications = []store.MessageEvent{}, nil
	assert.Equal(t, m, state)
	_, err = s.Messages.GetMessageState(ctx, provider, "msg_none")
	assert.ErrorIs(t, err, domain.ErrNotFound)
}

func TestApplyStatusConcurrentAttemptsOfOneEvent(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	opened := kindEvent("evt_open", "msg_1", domain.KindOpened, at(5))
	delivered := statusEvent("evt_delivered", "msg_1", domain.StatusDelivered, "", at(1))

	const n = 10
	results := make([]domain.ApplyResult, 2*n)
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 2 * n {
		ev := opened
		if i%2 == 1 {
			ev = delivered
		}
		wg.Go(func() {
			<-start
			results[i], errs[i] = s.Events.ApplyStatus(ctx, ev, rules)
		})
	}
	close(start)
	wg.Wait()

	for i := range 2 * n {
		require.NoError(t, errs[i])
		assert.Equal(t, results[i%2], results[i], "attempt %d", i)
	}
	assert.Equal(t, domain.OutcomeCounted, results[0].Outcome)
	assert.Equal(t, domain.ApplyResult{
		Outcome: domain.OutcomeMoved, To: domain.StatusDelivered, Recipient: "to@example.com", Version: 1,
	}, results[1])

	m, err := s.Messages.GetMessage(ctx, provider, "msg_1")
	require.NoError(t, err)
	assert.Equal(t, int64(1), m.Opens)
	assert.Equal(t, domain.StatusDelivered, m.Status)
	assert.Equal(t, int64(1), m.Version)
	assert.Len(t, m.Events, 2)
}

func TestApplyStatusOutOfOrderLifecycle(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	const msg = "msg_lifecycle"

	// Provider order: accepted(1) deferred(2) delivered(3) bounced(4); arrival order differs.
	steps := []struct {
		ev   domain.Event
		want domain.ApplyResult
	}{
		{
			statusEvent("e_delivered", msg, domain.StatusDelivered, "", at(3)),
			domain.ApplyResult{Outcome: domain.OutcomeMoved, From: "", To: domain.StatusDelivered, Version: 1},
		},
		{
			statusEvent("e_accepted", msg, domain.StatusAccepted, "", at(1)),
			domain.ApplyResult{Outcome: domain.OutcomeStale, From: domain.StatusDelivered, To: domain.StatusDelivered, Version: 1},
		},
		{
			statusEvent("e_bounced", msg, domain.StatusBounced, domain.BounceHard, at(4)),
			domain.ApplyResult{Outcome: domain.OutcomeMoved, From: domain.StatusDelivered, To: domain.StatusBounced, BounceType: domain.BounceHard, Version: 2, Suppressed: true},
		},
		{
			statusEvent("e_deferred", msg, domain.StatusDeferred, "", at(2)),
			domain.ApplyResult{Outcome: domain.OutcomeStale, From: domain.StatusBounced, To: domain.StatusBounced, BounceType: domain.BounceHard, Version: 2},
		},
	}
	for _, step := range steps {
		got, err := s.Events.ApplyStatus(ctx, step.ev, rules)
		require.NoError(t, err)
		step.want.Recipient = "to@example.com"
		assert.Equal(t, step.want, got, step.ev.EventID)
	}

	m, err := s.Messages.GetMessage(ctx, provider, msg)
	require.NoError(t, err)
	assert.Equal(t, provider, m.Provider)
	assert.Equal(t, msg, m.MessageID)
	assert.Equal(t, domain.StatusBounced, m.Status)
	assert.Equal(t, domain.BounceHard, m.BounceType)
	assert.Equal(t, "to@example.com", m.Recipient)
	assert.Equal(t, int64(2), m.Version)
	assert.False(t, m.CreatedAt.IsZero())
	assert.False(t, m.UpdatedAt.Before(m.CreatedAt))

	require.Len(t, m.Events, 4)
	ids := map[string]store.MessageEvent{}
	for _, e := range m.Events {
		ids[e.EventID] = e
	}
	assert.True(t, ids["e_bounced"].Moved)
	assert.Equal(t, domain.OutcomeStale, ids["e_deferred"].Outcome)
	assert.False(t, ids["e_deferred"].Moved)
	assert.Equal(t, domain.StatusDeferred, ids["e_deferred"].Status)
	assert.Equal(t, "email.deferred", ids["e_deferred"].Type)
	assert.True(t, ids["e_deferred"].OccurredAt.Equal(at(2)))
	assert.Equal(t, domain.StatusDelivered, ids["e_bounced"].From)
	assert.Equal(t, domain.StatusBounced, ids["e_bounced"].To)
	assert.Equal(t, int64(2), ids["e_bounced"].Version)
}

func TestApplyStatusSubMicrosecondTimesFoldInAnyOrder(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	// PostgreSQL stores microseconds: the two events tie on time there, so the event id must
	// decide in both arrival orders, as it would if the key never left memory.
	a := statusEvent("e_b", "", domain.StatusFailed, "", base.Add(700*time.Nanosecond))
	b := statusEvent("e_a", "", domain.StatusBounced, domain.BounceSoft, base.Add(300*time.Nanosecond))
	var finals []store.Message
	for i, order := range [][]domain.Event{{a, b}, {b, a}} {
		msg := fmt.Sprintf("msg_%d", i)
		for _, ev := range order {
			ev.MessageID = msg
			ev.EventID += "_" + msg
			_, err := s.Events.ApplyStatus(ctx, ev, rules)
			require.NoError(t, err)
		}
		m, err := s.Messages.GetMessage(ctx, provider, msg)
		require.NoError(t, err)
		finals = append(finals, m)
	}
	assert.Equal(t, domain.StatusFailed, finals[0].Status)
	assert.Equal(t, finals[0].Status, finals[1].Status)
	assert.Equal(t, finals[0].BounceType, finals[1].BounceType)
}

func TestApplyStatusEngagementCountsOncePerEvent(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	const msg = "msg_engaged"

	_, err := s.Events.ApplyStatus(ctx, statusEvent("e_delivered", msg, domain.StatusDelivered, "", at(1)), rules)
	require.NoError(t, err)

	open2 := kindEvent("e_open_2", msg, domain.KindOpened, at(30))
	open1 := kindEvent("e_open_1", msg, domain.KindOpened, at(20))
	click := kindEvent("e_click", msg, domain.KindClicked, at(40))
	unsub := kindEvent("e_unsub", msg, domain.KindUnsubscribed, at(50))
	for _, ev := range []domain.Event{open2, open2, open1, click, click, open2, unsub, unsub} {
		res, err := s.Events.ApplyStatus(ctx, ev, rules)
		require.NoError(t, err)
		want := domain.OutcomeCounted
		if ev.Kind == domain.KindUnsubscribed {
			want = domain.OutcomeFlagged
		}
		assert.Equal(t, domain.ApplyResult{
			Outcome: want, From: domain.StatusDelivered, To: domain.StatusDelivered,
			Recipient: "to@example.com", Version: 1,
			// The unsubscribe suppresses the message's recipient; its retry reports the same.
			Suppressed: ev.Kind == domain.KindUnsubscribed,
		}, res, ev.EventID)
	}

	m, err := s.Messages.GetMessage(ctx, provider, msg)
	require.NoError(t, err)
	assert.Equal(t, int64(2), m.Opens)
	assert.Equal(t, int64(1), m.Clicks)
	require.NotNil(t, m.FirstOpenedAt)
	assert.True(t, m.FirstOpenedAt.Equal(at(20)), "first open is the earliest, not the first to arrive")
	require.NotNil(t, m.FirstClickedAt)
	assert.True(t, m.FirstClickedAt.Equal(at(40)))
	assert.True(t, m.Unsubscribed)
	require.NotNil(t, m.UnsubscribedAt)
	assert.True(t, m.UnsubscribedAt.Equal(at(50)))
	assert.Equal(t, domain.StatusDelivered, m.Status)
	assert.Equal(t, int64(1), m.Version, "engagement never moves the version")
	assert.Len(t, m.Events, 5)
}

func TestApplyStatusEngagementBeforeAnyStatus(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	// Opens can arrive before the delivery event; the message is created without a status.
	res, err := s.Events.ApplyStatus(ctx, kindEvent("e_open", "msg_early", domain.KindOpened, at(9)), rules)
	require.NoError(t, err)
	assert.Equal(t, domain.ApplyResult{Outcome: domain.OutcomeCounted}, res)

	res, err = s.Events.ApplyStatus(ctx, statusEvent("e_delivered", "msg_early", domain.StatusDelivered, "", at(1)), rules)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeMoved, res.Outcome)
	assert.Equal(t, "to@example.com", res.Recipient, "the recipient is learnt from a later event")
}

func TestApplyStatusRejectsOtherKinds(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	for _, kind := range []domain.Kind{domain.KindInbound, domain.KindUnknown} {
		_, err := s.Events.ApplyStatus(t.Context(), kindEvent("e_"+string(kind), "msg_1", kind, at(1)), rules)
		assert.Error(t, err, kind)
	}
	_, err := s.Events.ApplyStatus(t.Context(), statusEvent("e_nomsg", "", domain.StatusDelivered, "", at(1)), rules)
	assert.Error(t, err)
	assert.Equal(t, 0, countRows(t, s, `SELECT count(*) FROM messages`))
	assert.Equal(t, 0, countRows(t, s, `SELECT count(*) FROM message_events`))
}

func TestApplyStatusConcurrentEventsOfOneMessage(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	const msg = "msg_busy"
	evs := []domain.Event{
		statusEvent("e01", msg, domain.StatusAccepted, "", at(1)),
		statusEvent("e02", msg, domain.StatusDeferred, "", at(2)),
		statusEvent("e03", msg, domain.StatusDeferred, "", at(3)),
		statusEvent("e04", msg, domain.StatusDelivered, "", at(4)),
		statusEvent("e05", msg, domain.StatusBounced, domain.BounceSoft, at(5)),
		statusEvent("e06", msg, domain.StatusFailed, "", at(5)),
		statusEvent("e07", msg, domain.StatusComplained, "", at(6)),
		statusEvent("e08", msg, domain.StatusDelivered, "", at(9)),
		kindEvent("e09", msg, domain.KindOpened, at(7)),
		kindEvent("e10", msg, domain.KindClicked, at(8)),
		kindEvent("e11", msg, domain.KindOpened, at(8)),
	}
	results := make([]domain.ApplyResult, len(evs))
	errs := make([]error, len(evs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, ev := range evs {
		wg.Go(func() {
			<-start
			results[i], errs[i] = s.Events.ApplyStatus(ctx, ev, rules)
		})
	}
	close(start)
	wg.Wait()

	moved := map[int64]string{}
	for i, res := range results {
		require.NoError(t, errs[i])
		if res.Outcome == domain.OutcomeMoved {
			assert.NotContains(t, moved, res.Version, "two events moved to the same version")
			moved[res.Version] = evs[i].EventID
		}
	}
	m, err := s.Messages.GetMessage(ctx, provider, msg)
	require.NoError(t, err)
	assert.Equal(t, domain.StatusComplained, m.Status)
	assert.Equal(t, "", m.BounceType)
	// Each visible change bumps the version once, whatever the interleaving.
	assert.Equal(t, int64(len(moved)), m.Version)
	assert.Equal(t, int64(2), m.Opens)
	assert.Equal(t, int64(1), m.Clicks)
	assert.Len(t, m.Events, len(evs))
}

func TestNotifications(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()

	id := domain.NotificationID(provider, "evt_1", "slack", "status.moved")
	assert.Equal(t, id, domain.NotificationID(provider, "evt_1", "slack", "status.moved"))

	first, err := s.Notifications.EnsureNotification(ctx, delivery.Notification{
		Provider: provider, EventID: "evt_1", Sink: "slack", Type: "status.moved",
		Body: json.RawMessage(`{"text":"first","at":1}`),
	})
	require.NoError(t, err)
	assert.Equal(t, id, first.ID)
	assert.Equal(t, domain.NotificationPending, first.Status)
	assert.Zero(t, first.Attempts)
	assert.JSONEq(t, `{"text":"first","at":1}`, string(first.Body))
	assert.False(t, first.CreatedAt.IsZero())
	assert.Nil(t, first.SentAt)

	// A retry renders a different body; the stored one must win, byte for byte.
	again, err := s.Notifications.EnsureNotification(ctx, delivery.Notification{
		ID: id, Provider: provider, EventID: "evt_1", Sink: "slack", Type: "status.moved",
		Body: json.RawMessage(`{"text":"second","at":2}`),
	})
	require.NoError(t, err)
	assert.Equal(t, first, again)

	_, err = s.Notifications.EnsureNotification(ctx, delivery.Notification{
		ID: "ntf_wrong", Provider: provider, EventID: "evt_1", Sink: "slack", Type: "status.moved",
		Body: json.RawMessage(`{}`),
	})
	assert.Error(t, err)

	other, err := s.Notifications.EnsureNotification(ctx, delivery.Notification{
		Provider: provider, EventID: "evt_1", Sink: "webhook", Type: "status.moved",
		Body: json.RawMessage(`{"x":1}`),
	})
	require.NoError(t, err)
	assert.NotEqual(t, id, other.ID)

	require.NoError(t, s.Notifications.RecordNotificationAttempt(ctx, id, "503 from slack"))
	require.NoError(t, s.Notifications.RecordNotificationAttempt(ctx, id, ""))
	require.NoError(t, s.Notifications.RecordNotificationAttempt(ctx, id, "timeout"))
	require.NoError(t, s.Notifications.MarkNotificationSent(ctx, id))
	require.NoError(t, s.Notifications.MarkNotificationSent(ctx, id), "marking sent twice is a no-op")
	require.NoError(t, s.Notifications.MarkNotificationFailed(ctx, id, "late failure"), "a sent notification stays sent")

	require.NoError(t, s.Notifications.RecordNotificationAttempt(ctx, other.ID, "410 gone"))
	require.NoError(t, s.Notifications.MarkNotificationFailed(ctx, other.ID, "gave up: 410 gone"))

	list, err := storetest.Notifications(ctx, s.Pool(), provider, "evt_1")
	require.NoError(t, err)
	require.Len(t, list, 2)
	byID := map[string]delivery.Notification{list[0].ID: list[0], list[1].ID: list[1]}

	sent := byID[id]
	assert.Equal(t, domain.NotificationSent, sent.Status)
	assert.Equal(t, 4, sent.Attempts)
	assert.Empty(t, sent.LastError)
	require.NotNil(t, sent.SentAt)
	assert.JSONEq(t, `{"text":"first","at":1}`, string(sent.Body))

	failed := byID[other.ID]
	assert.Equal(t, domain.NotificationFailed, failed.Status)
	assert.Equal(t, 1, failed.Attempts)
	assert.Equal(t, "gave up: 410 gone", failed.LastError)
	assert.Nil(t, failed.SentAt)

	for name, err := range map[string]error{
		"attempt": s.Notifications.RecordNotificationAttempt(ctx, "ntf_missing", "x"),
		"sent":    s.Notifications.MarkNotificationSent(ctx, "ntf_missing"),
		"failed":  s.Notifications.MarkNotificationFailed(ctx, "ntf_missing", "x"),
	} {
		assert.ErrorIs(t, err, domain.ErrNotFound, name)
	}

	none, err := storetest.Notifications(ctx, s.Pool(), provider, "evt_none")
	require.NoError(t, err)
	assert.Empty(t, none)
}

func TestGetMessageNotFound(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	_, err := s.Messages.GetMessage(t.Context(), provider, "msg_missing")
	assert.ErrorIs(t, err, domain.ErrNotFound)
	assert.True(t, errors.Is(err, domain.ErrNotFound))
}

func TestLateAttemptDoesNotOverwriteTheReasonForGivingUp(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	id := domain.NotificationID("postscale", "evt_late", "app", "message.status_changed")
	if _, err := st.Notifications.EnsureNotification(ctx, delivery.Notification{ID: id, Provider: "postscale", EventID: "evt_late", Sink: "app", Type: "message.status_changed", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := st.Notifications.MarkNotificationFailed(ctx, id, "gave up: ScheduleToClose timeout"); err != nil {
		t.Fatal(err)
	}
	if err := st.Notifications.RecordNotificationAttempt(ctx, id, "sink responded 500"); err != nil {
		t.Fatal(err)
	}
	ns, err := storetest.Notifications(ctx, st.Pool(), "postscale", "evt_late")
	if err != nil || len(ns) != 1 || ns[0].LastError != "gave up: ScheduleToClose timeout" || ns[0].Attempts != 1 || ns[0].Status != domain.NotificationFailed {
		t.Fatalf("rows %+v (err %v)", ns, err)
	}
}
