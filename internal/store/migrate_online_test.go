package store_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// EnvMigrationRows sets how many events TestOnlineMigrationOfAPopulatedTable loads in the old
// form (default 50,000, a few seconds; docs/BENCHMARKS.md has a run with 1,000,000).
const EnvMigrationRows = "MAILHOOK_MIGRATION_ROWS"

// EnvMigrationBatch sets the batch size the test's MoveLegacyPayloads runs with (default 1000).
const EnvMigrationBatch = "MAILHOOK_MIGRATION_BATCH"

// The schema version before event payloads moved out of webhook_events (00009).
const beforePayloadPartitions = 8

// qLoadLegacy writes $1 events the way releases before 00009 stored them, spread over the 90
// days before now: the provider's JSON in webhook_events.payload and the normalized event
// (domain.Event's JSON, its raw included) in .normalized. A few in 97 had no JSON of their own
// (raw null): their payload was the normalized event. One in 20 is unprocessed. The shapes are
// Postscale's: status events (one bounce in ten, with its details), opens, clicks, inbound
// emails with a body, and a type mailhook does not know.
const qLoadLegacy = `
INSERT INTO webhook_events (provider, event_id, event_type, message_id, occurred_at, received_at,
                            processed_at, payload, normalized, relayed_at, picked_at, next_attempt_at)
SELECT p, e, t, m, at - interval '2 seconds', at,
       CASE WHEN i % 20 = 0 THEN NULL ELSE at + interval '1 second' END,
       CASE WHEN noraw THEN ev || '{"raw": null}' ELSE raw END,
       ev || jsonb_build_object('raw', CASE WHEN noraw THEN 'null'::jsonb ELSE raw END),
       at, at + interval '500 milliseconds', at
FROM (
    SELECT g.*, i % 97 = 0 AS noraw,
           jsonb_build_object('id', e, 'type', t, 'created_at', ts, 'data',
               jsonb_build_object('email_id', m, 'from', 'hello@app.example', 'to', r, 'subject', 'Your order #' || i)
               || CASE t
                  WHEN 'email.bounced' THEN jsonb_build_object('bounce', jsonb_build_object(
                      'type', 'hard', 'code', 550, 'status', '5.1.1', 'message', '550 5.1.1 <' || r || '>: user unknown'))
                  WHEN 'email.received' THEN jsonb_build_object(
                      'text', repeat('Hello, a question about order #' || i || '. ', 12),
                      'html', '<p>' || repeat('Hello, a question about order #' || i || '. ', 12) || '</p>')
                  WHEN 'email.clicked' THEN jsonb_build_object('link', 'https://app.example/o/' || i)
                  ELSE '{}'::jsonb END) AS raw,
           jsonb_build_object('provider', p, 'event_id', e, 'type', t, 'kind', kind,
                              'message_id', m, 'recipient', r, 'occurred_at', ts)
           || CASE t
              WHEN 'email.delivered' THEN '{"status": "delivered"}'::jsonb
              WHEN 'email.sent' THEN '{"status": "accepted"}'::jsonb
              WHEN 'email.bounced' THEN jsonb_build_object('status', 'bounced', 'bounce_type', 'hard', 'bounce',
                  jsonb_build_object('smtp_code', 550, 'enhanced_code', '5.1.1',
                                     'diagnostic', '550 5.1.1 <' || r || '>: user unknown', 'category', 'unknown_user'))
              ELSE '{}'::jsonb END AS ev
    FROM (
        SELECT i, p, e, t, at,
               to_char((at - interval '2 seconds') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS ts,
               CASE t WHEN 'email.received' THEN 'em_' || i ELSE 'msg_' || (i / 4) END AS m,
               CASE t WHEN 'email.received' THEN 'support@app.example' ELSE 'user' || (i % 50000) || '@example.com' END AS r,
               CASE t WHEN 'email.opened' THEN 'opened' WHEN 'email.clicked' THEN 'clicked'
                      WHEN 'email.received' THEN 'inbound' WHEN 'email.scheduled' THEN 'unknown'
                      ELSE 'status' END AS kind
        FROM (
            SELECT i, (ARRAY['postscale', 'sendgrid', 'resend'])[i % 3 + 1] AS p,
                   'evt_' || substr(md5(i::text), 1, 24) AS e,
                   (ARRAY['email.delivered', 'email.delivered', 'email.delivered', 'email.sent', 'email.sent',
                          'email.bounced', 'email.opened', 'email.clicked', 'email.received', 'email.scheduled'])[i % 10 + 1] AS t,
                   date_trunc('second', now() - interval '90 days' * (i::float8 / $1)) AS at
            FROM generate_series(1, $1::int) AS i
        ) g0
    ) g
) x`

// qLoadLegacyNotifications writes, for every processed inbound email and bounce, the
// notification the old release sent, its body in notifications.body.
const qLoadLegacyNotifications = `
INSERT INTO notifications (id, provider, event_id, sink, type, status, attempts, body, created_at, sent_at, updated_at)
SELECT id, provider, event_id, 'app', typ, 'sent', 1,
       jsonb_build_object('id', id, 'type', typ, 'created_at', processed_at, 'data',
           CASE typ WHEN 'email.received' THEN jsonb_build_object(
               'provider', provider, 'event_id', event_id, 'email_id', message_id,
               'recipient', normalized->'recipient', 'occurred_at', occurred_at, 'payload', normalized->'raw')
           ELSE jsonb_build_object(
               'provider', provider, 'message_id', message_id, 'recipient', normalized->'recipient',
               'status', 'bounced', 'previous_status', 'delivered', 'bounce_type', 'hard', 'version', 2,
               'event_id', event_id, 'event_type', event_type, 'occurred_at', occurred_at,
               'bounce', normalized->'bounce') END),
       processed_at, processed_at, processed_at
FROM (
    SELECT w.*, CASE w.event_type WHEN 'email.received' THEN 'email.received' ELSE 'message.status_changed' END AS typ,
           'ntf_' || md5(w.provider || ':' || w.event_id || ':app') AS id
    FROM webhook_events w
    WHERE w.event_type IN ('email.received', 'email.bounced') AND w.processed_at IS NOT NULL
) n`

// qLegacyEnqueue is the acceptance path's insert before 00009 (the old release keeps running
// it while the migration runs and until the new release replaces it).
const qLegacyEnqueue = `
INSERT INTO webhook_events (provider, event_id, event_type, message_id, occurred_at, payload,
                            normalized, awaiting_start, next_attempt_at)
SELECT p, e, t, m, o, pl::jsonb, n::jsonb, true, now() + $8 * interval '1 microsecond'
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::text[])
     AS u(p, e, t, m, o, pl, n)
ON CONFLICT (provider, event_id) DO NOTHING
RETURNING provider, event_id`

// legacyEnqueue inserts ev as the old release did and reports whether it was new: payload was
// the provider's JSON, or the normalized event when there was none; normalized held the raw
// JSON too.
func legacyEnqueue(ctx context.Context, s *store.Store, ev domain.Event) (bool, error) {
	norm, err := json.Marshal(ev)
	if err != nil {
		return false, err
	}
	payload := norm
	if raw := bytes.TrimSpace(ev.Raw); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		payload = raw
	}
	var msg *string
	if ev.MessageID != "" {
		msg = &ev.MessageID
	}
	rows, err := s.Pool().Query(ctx, qLegacyEnqueue, []string{ev.Provider}, []string{ev.EventID}, []string{ev.Type},
		[]*string{msg}, []time.Time{ev.OccurredAt}, []string{string(payload)}, []string{string(norm)}, 0)
	if err != nil {
		return false, err
	}
	var (
		n    int
		p, e string
	)
	_, err = pgx.ForEachRow(rows, []any{&p, &e}, func() error { n++; return nil })
	return n == 1, err
}

// liveEvent is an event of the traffic that keeps arriving during the migration: mostly
// deliveries, every fifth an inbound email.
func liveEvent(n int) domain.Event {
	id := fmt.Sprintf("live_%07d", n)
	at := time.Now().UTC().Truncate(time.Second)
	if n%5 == 0 {
		return domain.Event{Provider: "postscale", EventID: id, Type: "email.received", Kind: domain.KindInbound,
			MessageID: "em_" + id, Recipient: "support@app.example", OccurredAt: at,
			Raw: json.RawMessage(fmt.Sprintf(`{"id":%q,"type":"email.received","created_at":%q,"data":{"email_id":"em_%s","text":"Hello from %s"}}`,
				id, at.Format(time.RFC3339), id, id))}
	}
	return domain.Event{Provider: "postscale", EventID: id, Type: "email.delivered", Kind: domain.KindStatus,
		Status: domain.StatusDelivered, MessageID: "msg_" + id, Recipient: "live@example.com", OccurredAt: at,
		Raw: json.RawMessage(fmt.Sprintf(`{"id":%q,"type":"email.delivered","created_at":%q,"data":{"email_id":"msg_%s"}}`,
			id, at.Format(time.RFC3339), id))}
}

// Phases of the migration, as the live writer sees them.
const (
	phaseOld       = iota // the old release, before the migration
	phaseMigrating        // the old release, while goose applies 00009
	phaseNew              // the new release, before the move
	phaseMoving           // the new release, while MoveLegacyPayloads runs
	phaseAfter            // the new release, after the move
	phases
)

var phaseNames = [phases]string{"old release", "migration", "new release", "move", "after the move"}

// liveWriter inserts events one request at a time, as the service accepts them, through the
// old release's insert until the switch and the new one's after it, re-sending an old event
// now and then (which must be a duplicate), and keeps the longest insert of each phase.
type liveWriter struct {
	s     *store.Store
	phase atomic.Int32
	// resend returns an event recorded before the migration.
	resend func(r *rand.Rand) domain.Event

	mu       sync.Mutex
	began    [phases]time.Time       // when the phase began (setPhase)
	took     [phases][]time.Duration // every insert's time, re-sends included
	max      [phases]time.Duration   // the longest insert
	maxAt    [phases]time.Time       // when it began
	fresh    [phases]int             // new events inserted
	inserted []domain.Event
	errs     []error
}

func (w *liveWriter) setPhase(ph int32) {
	w.mu.Lock()
	w.began[ph] = time.Now()
	w.mu.Unlock()
	w.phase.Store(ph)
}

// latencies says, per phase, how many inserts ran, the 99th percentile and the longest, and
// when in the phase it began.
func (w *liveWriter) latencies() string {
	var out []string
	for ph := range phases {
		took := slices.Clone(w.took[ph])
		if len(took) == 0 {
			out = append(out, phaseNames[ph]+": no insert")
			continue
		}
		slices.Sort(took)
		out = append(out, fmt.Sprintf("%s: %d inserts, p99 %s, longest %s (began %s into the phase)", phaseNames[ph], len(took),
			took[len(took)*99/100].Round(time.Microsecond), took[len(took)-1].Round(time.Microsecond),
			w.maxAt[ph].Sub(w.began[ph]).Round(time.Millisecond)))
	}
	return strings.Join(out, "; ")
}

func (w *liveWriter) run(ctx context.Context) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 1; ctx.Err() == nil; n++ {
		ev, fresh := liveEvent(n), true
		if n%7 == 0 {
			ev, fresh = w.resend(r), false
		}
		phase := w.phase.Load()
		start := time.Now()
		var (
			isNew bool
			err   error
		)
		if phase < phaseNew {
			isNew, err = legacyEnqueue(ctx, w.s, ev)
		} else {
			var ok []bool
			ok, err = storetest.Enqueue(ctx, w.s, ev)
			isNew = err == nil && ok[0]
		}
		took := time.Since(start)
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		if took > w.max[phase] {
			w.max[phase], w.maxAt[phase] = took, start
		}
		w.took[phase] = append(w.took[phase], took)
		switch {
		case err != nil:
			w.errs = append(w.errs, fmt.Errorf("%s: insert %s: %w", phaseNames[phase], ev.Key(), err))
		case isNew != fresh:
			w.errs = append(w.errs, fmt.Errorf("%s: %s inserted %v, want %v (a re-send of an old event must be a duplicate)",
				phaseNames[phase], ev.Key(), isNew, fresh))
		case fresh:
			w.inserted = append(w.inserted, ev)
			w.fresh[phase]++
		}
		w.mu.Unlock()
	}
}

// waitInserts waits until the writer has made n more inserts in the current phase.
func (w *liveWriter) waitInserts(t *testing.T, n int) {
	t.Helper()
	phase := w.phase.Load()
	w.mu.Lock()
	want := len(w.took[phase]) + n
	w.mu.Unlock()
	testenv.WaitFor(t, "the live writer's inserts", testenv.Stall, func() (int64, bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return int64(len(w.took[phase])), len(w.took[phase]) >= want || len(w.errs) > 0, nil
	})
}

// relSize is the size of table with its indexes and TOAST, and its partitions' for a
// partitioned table; 0 for a table that does not exist yet.
func relSize(t *testing.T, s *store.Store, table string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, s.Pool().QueryRow(t.Context(), `
SELECT COALESCE(sum(pg_total_relation_size(c)), 0)::bigint
FROM (SELECT to_regclass($1) AS c UNION ALL SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass($1)) r`,
		table).Scan(&n))
	return n
}

func logSizes(t *testing.T, s *store.Store, when string) {
	t.Helper()
	var out string
	for _, table := range []string{"webhook_events", store.PayloadsTable, "notifications", store.BodiesTable} {
		out += fmt.Sprintf(" %s %.1f MB", table, float64(relSize(t, s, table))/(1<<20))
	}
	t.Logf("sizes %s:%s", when, out)
}

// wal is what pg_stat_wal counts: the server's, every database's.
type wal struct{ bytes, fpi int64 }

func (a wal) minus(b wal) wal { return wal{a.bytes - b.bytes, a.fpi - b.fpi} }

func walStats(t *testing.T, s *store.Store) wal {
	t.Helper()
	var w wal
	require.NoError(t, s.Pool().QueryRow(t.Context(), `SELECT wal_bytes::bigint, wal_fpi FROM pg_stat_wal`).Scan(&w.bytes, &w.fpi))
	return w
}

// sameEvent compares a read event with the one expected, its raw JSON as JSON (jsonb keeps it
// in its own spacing and key order).
func sameEvent(t *testing.T, want, got domain.Event, msgAndArgs ...any) {
	t.Helper()
	if want.Raw == nil || got.Raw == nil {
		assert.Equal(t, want.Raw == nil, got.Raw == nil, msgAndArgs...)
	} else {
		assert.JSONEq(t, string(want.Raw), string(got.Raw), msgAndArgs...)
	}
	want.Raw, got.Raw = nil, nil
	assert.Equal(t, want, got, msgAndArgs...)
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s", name)
	require.Positive(t, n, "%s", name)
	return n
}

// The migration from the schema before 00009 runs online on a populated table: the old
// release keeps inserting while goose applies 00009, the new one while MoveLegacyPayloads
// moves every old payload and notification body; old events read the same before the
// migration, between it and the move, and after the move; an old event re-sent at any point is
// a duplicate; and afterwards nothing is left in the legacy columns and no raw JSON is stored
// twice. It logs the times, the longest insert of each phase and the tables' sizes.
func TestOnlineMigrationOfAPopulatedTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rows := envInt(t, EnvMigrationRows, 50_000)
	batch := envInt(t, EnvMigrationBatch, 1000)
	dbURL := storetest.NewEmptyDatabase(t)
	require.NoError(t, store.MigrateTo(ctx, dbURL, beforePayloadPartitions))
	s, err := store.Open(ctx, dbURL, store.Options{})
	require.NoError(t, err)
	t.Cleanup(s.Close)

	start := time.Now()
	_, err = s.Pool().Exec(ctx, qLoadLegacy, rows)
	require.NoError(t, err, "load the old rows")
	loadEvents := time.Since(start)
	_, err = s.Pool().Exec(ctx, qLoadLegacyNotifications)
	require.NoError(t, err, "load the old notifications")
	_, err = s.Pool().Exec(ctx, `VACUUM ANALYZE webhook_events, notifications`)
	require.NoError(t, err)
	notifications := countRows(t, s, `SELECT count(*) FROM notifications`)
	t.Logf("loaded %d events (%s) and %d notifications in the old form, vacuumed, in %s", rows,
		loadEvents.Round(time.Millisecond), notifications, time.Since(start).Round(time.Millisecond))
	logSizes(t, s, "before the migration")

	// What the old release reads of a sample of old events (normalized, raw included) and of
	// their notifications. The sample holds every kind, and events without JSON of their own.
	sample := map[[2]string]domain.Event{}
	var sampleKeys [][2]string
	keyRows, err := s.Pool().Query(ctx, `
(SELECT provider, event_id, normalized FROM webhook_events ORDER BY md5(event_id || 'sample') LIMIT 400)
UNION
(SELECT provider, event_id, normalized FROM webhook_events WHERE normalized->'raw' = 'null' LIMIT 20)
UNION
(SELECT provider, event_id, normalized FROM webhook_events WHERE event_type = 'email.received' LIMIT 50)`)
	require.NoError(t, err)
	var (
		p, e string
		norm []byte
	)
	_, err = pgx.ForEachRow(keyRows, []any{&p, &e, &norm}, func() error {
		var ev domain.Event
		if err := json.Unmarshal(norm, &ev); err != nil {
			return err
		}
		if bytes.Equal(ev.Raw, []byte("null")) {
			ev.Raw = nil // the old release sent it on as JSON null; so does the new one
		}
		sample[[2]string{p, e}] = ev
		sampleKeys = append(sampleKeys, [2]string{p, e})
		return nil
	})
	require.NoError(t, err)
	slices.SortFunc(sampleKeys, func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	})
	oldBodies := map[string]json.RawMessage{}
	var (
		id   string
		body []byte
	)
	bodyRows, err := s.Pool().Query(ctx, `
SELECT n.id, n.body FROM notifications n
JOIN unnest($1::text[], $2::text[]) AS k(p, e) ON n.provider = k.p AND n.event_id = k.e`, keyColumn(sampleKeys, 0), keyColumn(sampleKeys, 1))
	require.NoError(t, err)
	_, err = pgx.ForEachRow(bodyRows, []any{&id, &body}, func() error {
		oldBodies[id] = slices.Clone(body)
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, oldBodies, "the sample has notifications")

	// checkReads reads the sample through the new release's store: every old event is the
	// same, its notifications' bodies too, and a re-send is a duplicate.
	checkReads := func(when string) {
		t.Helper()
		resend := make([]domain.Event, 0, len(sampleKeys))
		for _, k := range sampleKeys {
			want := sample[k]
			got, _, _, err := s.Events.StoredEvent(ctx, k[0], k[1])
			if !assert.NoError(t, err, "%s: StoredEvent %s", when, k) {
				continue
			}
			sameEvent(t, want, got, "%s: StoredEvent %s", when, k)
			rec, err := s.Replays.RecordedEvent(ctx, k[0], k[1])
			if assert.NoError(t, err, "%s: RecordedEvent %s", when, k) && assert.NotNil(t, rec.Event, "%s: %s: %v", when, k, rec.Missing) {
				sameEvent(t, want, *rec.Event, "%s: RecordedEvent %s", when, k)
			}
			ns, err := storetest.Notifications(ctx, s.Pool(), k[0], k[1])
			require.NoError(t, err)
			for _, n := range ns {
				assert.JSONEq(t, string(oldBodies[n.ID]), string(n.Body), "%s: notification %s", when, n.ID)
			}
			resend = append(resend, want)
		}
		fresh, err := storetest.Enqueue(ctx, s, resend...)
		require.NoError(t, err, "%s: re-send", when)
		assert.NotContains(t, fresh, true, "%s: a re-sent old event is a duplicate", when)
	}

	w := &liveWriter{s: s, resend: func(r *rand.Rand) domain.Event { return sample[sampleKeys[r.IntN(len(sampleKeys))]] }}
	w.setPhase(phaseOld)
	writerCtx, stopWriter := context.WithCancel(ctx)
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); w.run(writerCtx) }()
	stop := func() {
		stopWriter()
		<-writerDone
	}
	defer stop()
	w.waitInserts(t, 20)

	w.setPhase(phaseMigrating)
	start = time.Now()
	require.NoError(t, store.MigrateTo(ctx, dbURL, beforePayloadPartitions+1), "migrate to 00009 beside the old release")
	migration := time.Since(start)
	// And the later migrations this release carries (per-sink delivery: new tables, nullable
	// columns, partial indexes built concurrently), beside the same traffic.
	start = time.Now()
	require.NoError(t, store.Migrate(ctx, dbURL), "migrate to the latest beside the old release")
	later := time.Since(start)
	// The new release starts: it creates the partitions around now (serve.Dial).
	_, err = s.Retention.EnsurePartitions(ctx, store.DefaultPartitioning, time.Now(), time.Now())
	require.NoError(t, err)
	w.setPhase(phaseNew)
	w.waitInserts(t, 20)
	checkReads("after the migration, before the move")

	w.setPhase(phaseMoving)
	walBefore := walStats(t, s)
	start = time.Now()
	moved, err := s.Retention.MoveLegacyPayloads(ctx, batch, store.DefaultPartitioning)
	require.NoError(t, err)
	move := time.Since(start)
	wal := walStats(t, s).minus(walBefore)
	w.setPhase(phaseAfter)
	w.waitInserts(t, 20)
	stop()

	w.mu.Lock()
	defer w.mu.Unlock()
	require.Empty(t, w.errs, "the live writer")
	t.Logf("the migrations after 00009: %s", later.Round(time.Millisecond))
	t.Logf("migration to 00009 %s; move of %d rows (batch %d) %s, %.0f rows/s", migration.Round(time.Millisecond),
		moved, batch, move.Round(time.Millisecond), float64(moved)/move.Seconds())
	t.Logf("WAL written during the move (the whole server's, whatever else ran): %.0f MB, %d full-page images",
		float64(wal.bytes)/(1<<20), wal.fpi)
	t.Logf("inserts beside it: %s", w.latencies())

	// Every legacy row moved: the old events and notifications, and whatever the old release
	// inserted before the switch (some may have been skipped while locked: a second run moves
	// them, as the retention run's next call would).
	again, err := s.Retention.MoveLegacyPayloads(ctx, batch, store.DefaultPartitioning)
	require.NoError(t, err)
	oldRelease := w.fresh[phaseOld] + w.fresh[phaseMigrating]
	assert.Equal(t, int64(rows+notifications+oldRelease), moved+again,
		"every old event and notification body moved, and the old release's last events")
	assert.Zero(t, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE payload IS NOT NULL OR normalized IS NOT NULL`),
		"no payload left in webhook_events' legacy columns")
	assert.Zero(t, countRows(t, s, `SELECT count(*) FROM notifications WHERE body IS NOT NULL`),
		"no body left in notifications' legacy column")
	assert.Equal(t, countRows(t, s, `SELECT count(*) FROM webhook_events`), countRows(t, s, `SELECT count(*) FROM event_payloads`),
		"one payload row per event")
	assert.Equal(t, notifications, countRows(t, s, `SELECT count(*) FROM notification_bodies`), "one body row per notification")
	assert.Zero(t, countRows(t, s, `SELECT count(*) FROM event_payloads WHERE event->'raw' IS NOT NULL AND event->'raw' <> 'null'::jsonb`),
		"the raw JSON is stored once: in payload, not again in event")
	assert.Equal(t, rows/97, countRows(t, s, `SELECT count(*) FROM event_payloads WHERE payload = 'null'::jsonb AND event_id LIKE 'evt_%'`),
		"an old event without JSON of its own has a JSON null payload")
	checkReads("after the move")

	// What the live traffic stored, through either release, reads as it was sent.
	for _, ev := range w.inserted {
		got, _, _, err := s.Events.StoredEvent(ctx, ev.Provider, ev.EventID)
		if assert.NoError(t, err, "live event %s", ev.Key()) {
			sameEvent(t, ev, got, "live event %s", ev.Key())
		}
	}
	t.Logf("%d live events inserted (%d by the old release) and read back", len(w.inserted), oldRelease)

	logSizes(t, s, "after the move")
	_, err = s.Pool().Exec(ctx, `VACUUM webhook_events, notifications`)
	require.NoError(t, err)
	logSizes(t, s, "after VACUUM")
	_, err = s.Pool().Exec(ctx, `VACUUM FULL webhook_events, notifications`)
	require.NoError(t, err)
	logSizes(t, s, "after VACUUM FULL")
}

func keyColumn(keys [][2]string, i int) []string {
	out := make([]string, len(keys))
	for j, k := range keys {
		out[j] = k[i]
	}
	return out
}
