package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailhook/mailhook/internal/domain"
)

const (
	// One statement per request, whatever the batch size: the arrays are unnested into rows,
	// in array order, which is the order EnqueueRows sorted them into (see there). The key rows
	// and the payload rows are inserted by the same statement, so both or neither commit.
	// ON CONFLICT DO NOTHING returns only the rows this statement inserted, so an event id
	// missing from the result was already recorded (a duplicate), by this request or another.
	qEnqueue = `
WITH u AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::text[],
                $9::text[], $10::text[])
         WITH ORDINALITY AS u(p, e, t, m, o, pl, n, pr, s, i)
)` + enqueueRows

	// qEnqueue for one row, its parameters scalars instead of one-element arrays: the most
	// common request (one event). PostgreSQL prices an array parameter at 10 elements in a
	// generic plan and at its real length in a custom one, so with arrays the custom plan always
	// looks cheaper and qEnqueue is planned at every execution (about 1 ms of planning per
	// request, TestPlansPerEventFreshAndWarm); with scalars both price one row and, after five
	// executions, each connection runs its cached generic plan (TestTheEventPathRunsOnCachedPlans).
	qEnqueueOne = `
WITH u AS (
    SELECT *
    FROM (VALUES ($1::text, $2::text, $3::text, $4::text, $5::timestamptz, $6::text, $7::text,
                  $9::text, $10::text, 1::bigint)) AS u(p, e, t, m, o, pl, n, pr, s, i)
)` + enqueueRows

	// What qEnqueue and qEnqueueOne do with their rows, u.
	enqueueRows = `, k AS (
    -- An event whose key under an earlier id format (pr, domain.Event.PriorEventID) is recorded
    -- with the same occurred_at was accepted before the upgrade: a duplicate, like its own key
    -- (a provider's retry re-sends the same body, so the time is the same to the microsecond).
    INSERT INTO webhook_events (provider, event_id, event_type, message_id, occurred_at, awaiting_start,
                                next_attempt_at, source)
    SELECT p, e, t, m, o, true, now() + $8 * interval '1 microsecond', NULLIF(s, '')
    FROM u
    WHERE pr = '' OR NOT EXISTS (SELECT 1 FROM webhook_events w
                                 WHERE w.provider = u.p AND w.event_id = u.pr AND w.occurred_at IS NOT DISTINCT FROM u.o)
    ORDER BY i
    ON CONFLICT (provider, event_id) DO NOTHING
    RETURNING provider, event_id, received_at
), payloads AS (
    -- Each new key's payload, from its first position in the arrays.
    INSERT INTO event_payloads (provider, event_id, received_at, payload, event)
    SELECT DISTINCT ON (k.provider, k.event_id) k.provider, k.event_id, k.received_at, u.pl::jsonb, u.n::jsonb
    FROM k JOIN u ON u.p = k.provider AND u.e = k.event_id
    ORDER BY k.provider, k.event_id, u.i
)
SELECT provider, event_id FROM k`

	// SKIP LOCKED lets every relay take a different slice of the waiting rows that are due; the
	// row locks last until the batch's transaction ends, so no other relay starts these
	// meanwhile. Ordering by next_attempt_at puts a row whose start failed behind the rows that
	// arrived meanwhile, so it never holds the head of the queue.
	qClaimInbox = `
SELECT ` + recordedColumns + `
FROM webhook_events w ` + storedJoin + `
WHERE w.awaiting_start AND w.next_attempt_at <= now()
ORDER BY w.next_attempt_at
LIMIT $1
FOR UPDATE OF w SKIP LOCKED`

	// The settle statements below update only rows still waiting that no other transaction
	// holds: a row a relay has claimed (locked) is the relay's to settle, and the process that
	// accepted it must not wait for it. A relay's own locks do not block its own statements.
	settleKeys = `
SELECT w.provider, w.event_id, k.err
FROM webhook_events w
JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(p, e, err) ON w.provider = k.p AND w.event_id = k.e
WHERE w.awaiting_start
FOR UPDATE OF w SKIP LOCKED`

	qMarkRelayed = `
UPDATE webhook_events w
SET awaiting_start = false, relayed_at = now(), relay_attempts = relay_attempts + 1, relay_error = NULL
FROM (` + settleKeys + `) s
WHERE w.provider = s.provider AND w.event_id = s.event_id`

	// The row waits Initial·2^attempts (at most Max) before a relay tries it again.
	qMarkRelayFailed = `
UPDATE webhook_events w
SET relay_attempts = relay_attempts + 1, relay_error = s.err,
    next_attempt_at = now() + LEAST($4::float8, $5::float8 * power(2, LEAST(relay_attempts, 30)))
                              * interval '1 microsecond'
FROM (` + settleKeys + `) s
WHERE w.provider = s.provider AND w.event_id = s.event_id`

	// Temporal refused the start for good: out of the inbox and into quarantine, where only an
	// operator's redrive runs it again.
	qQuarantineStart = `
UPDATE webhook_events w
SET awaiting_start = false, relay_attempts = relay_attempts + 1, relay_error = s.err,
    quarantined_at = now(), quarantine_stage = '` + StageStart + `', quarantine_error = s.err
FROM (` + settleKeys + `) s
WHERE w.provider = s.provider AND w.event_id = s.event_id`

	// Started by a relay within the window and not yet taken up by a worker: the backlog
	// the relays have handed to Temporal. The window lets a workflow that never runs (terminated
	// before its first activity) stop counting.
	qInFlight = `
SELECT count(*) FROM webhook_events
WHERE relayed_at IS NOT NULL AND picked_at IS NULL AND relayed_at > now() - $1 * interval '1 microsecond'`

	qInboxDepth = `SELECT count(*), min(received_at) FROM webhook_events WHERE awaiting_start`
)

// InboxRow is one event as the inbox stores it, encoded ahead of the insert (by the request's
// own goroutine, so a combined insert only copies bytes).
type InboxRow struct {
	provider, eventID, eventType string
	messageID                    *string
	occurredAt                   *time.Time
	payload                      string
	normalized                   string
	priorID                      string // domain.Event.PriorEventID
	source                       string // domain.Event.Source; "" for a webhook
}

var errNoNormalizedForm = errors.New("the event has no JSON form PostgreSQL can store")

// Key returns the row's provider and event id.
func (r InboxRow) Key() (provider, eventID string) { return r.provider, r.eventID }

// NewInboxRow encodes ev for the inbox. It fails with domain.ErrNotStorable when the event has no
// normalized form (the relay starts the workflow from it, so without it the event could never
// be processed; Storable refuses such events first, this is the backstop).
func NewInboxRow(ev domain.Event) (InboxRow, error) {
	payload, event := payloadColumns(ev)
	norm, ok := event.(string)
	if !ok {
		return InboxRow{}, fmt.Errorf("inbox row %s: %w: %w", ev.Key(), domain.ErrNotStorable, errNoNormalizedForm)
	}
	return InboxRow{provider: ev.Provider, eventID: ev.EventID, eventType: ev.Type,
		messageID: nullString(ev.MessageID), occurredAt: nullTime(ev.OccurredAt),
		payload: payload, normalized: norm, priorID: ev.PriorEventID, source: ev.Source}, nil
}

// EnqueueRows inserts rows into the inbox with one statement and reports, per row, whether this
// call inserted it (accepted) or found it already recorded (a duplicate). An id repeated within
// rows counts as inserted once, at its first position. Once it returns without error the rows
// are durable. Relays leave the new rows alone for hold, while the accepting process starts
// them itself; after that a relay starts whatever is still waiting. An error wrapping
// domain.ErrNotStorable means PostgreSQL refused the data (IsDataError): the same rows fail again.
func (s *Inbox) EnqueueRows(ctx context.Context, in []InboxRow, hold time.Duration) ([]bool, error) {
	n := len(in)
	// Every statement inserts in (provider, event_id) order. Two statements holding the same
	// keys in different orders would otherwise each wait for the other's uncommitted row, and
	// PostgreSQL would abort one with a deadlock (seen under load with concurrent re-sends).
	sorted := slices.Clone(in)
	slices.SortFunc(sorted, func(a, b InboxRow) int {
		return cmp.Or(strings.Compare(a.provider, b.provider), strings.Compare(a.eventID, b.eventID))
	})
	providers, ids, types, msgIDs, payloads, normalized := make([]string, n), make([]string, n),
		make([]string, n), make([]*string, n), make([]string, n), make([]string, n)
	occurred, priors, sources := make([]*time.Time, n), make([]string, n), make([]string, n)
	for i, r := range sorted {
		providers[i], ids[i], types[i], msgIDs[i] = r.provider, r.eventID, r.eventType, r.messageID
		occurred[i], payloads[i], normalized[i], priors[i], sources[i] = r.occurredAt, r.payload, r.normalized, r.priorID, r.source
	}
	inserted := make(map[[2]string]bool, n)
	err := withPartitions(ctx, s.db, func() error {
		clear(inserted)
		var rows pgx.Rows
		var err error
		if n == 1 {
			rows, err = s.pool.Query(ctx, qEnqueueOne, providers[0], ids[0], types[0], msgIDs[0], occurred[0], payloads[0], normalized[0], hold.Microseconds(), priors[0], sources[0])
		} else {
			rows, err = s.pool.Query(ctx, qEnqueue, providers, ids, types, msgIDs, occurred, payloads, normalized, hold.Microseconds(), priors, sources)
		}
		if err != nil {
			return err
		}
		var p, e string
		_, err = pgx.ForEachRow(rows, []any{&p, &e}, func() error {
			inserted[[2]string{p, e}] = true
			return nil
		})
		return err
	})
	if err != nil {
		return nil, enqueueError(n, err)
	}
	out := make([]bool, n)
	for i, r := range in {
		k := [2]string{r.provider, r.eventID}
		out[i] = inserted[k]
		delete(inserted, k) // a repeat later in the batch is a duplicate
	}
	return out, nil
}

func enqueueError(n int, err error) error {
	if domain.IsDataError(err) {
		return fmt.Errorf("enqueue %d events: %w: %w", n, domain.ErrNotStorable, err)
	}
	return fmt.Errorf("enqueue %d events: %w", n, err)
}

// Inbox counts the events waiting for the relay and returns when the oldest was received (zero
// time when none waits).
func (s *Inbox) Inbox(ctx context.Context) (int64, time.Time, error) {
	var (
		n      int64
		oldest *time.Time
	)
	if err := s.pool.QueryRow(ctx, qInboxDepth).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("inbox depth: %w", err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, *oldest, nil
}

// StageStart is the quarantine stage (as stored and shown) of an event whose workflow could not
// be started.
const StageStart = "start"

// Backoff is how long a row whose start failed waits before a relay tries it again: Initial
// after the first failure, doubling with each, at most Max.
type Backoff struct{ Initial, Max time.Duration }

// AfterStart is what a start means for its event's row (acceptance decides which).
type AfterStart uint8

const (
	// LeaveWaiting: not tried (a relay batch that gave up early); the row is left as it was,
	// so relay_attempts counts real tries only.
	LeaveWaiting AfterStart = iota
	// MarkStarted: its workflow is started, now or before; the row leaves the inbox.
	MarkStarted
	// Quarantine: it can never be started as it is; the row is quarantined (stage start) with
	// the Settlement's Error.
	Quarantine
	// RetryLater: the start failed and may succeed later; the row waits Backoff and keeps the
	// Error.
	RetryLater
	// RetryUncertain: the start ran out of time (start.IsUncertain): Temporal may have created
	// the workflow, whose worker then takes the row out of the inbox. The row waits Backoff.Max
	// before a relay starts it again, so that a slow Temporal is not asked again for a
	// workflow it is still creating or has created.
	RetryUncertain
)

// Settlement is one event's start, as its row records it.
type Settlement struct {
	Provider, EventID string
	Then              AfterStart
	Error             string
}

// RelayBatch claims up to limit of the waiting events that are due (rows other relays hold are
// skipped), calls start with them while holding their row locks (start returns one Settlement
// per event), then settles them as SettleStarts does, and returns how many were claimed and how
// many of those left the inbox (started, or quarantined). A crash before the commit releases the
// locks and leaves every claimed row waiting: its workflow ID makes the next start a duplicate,
// not a re-run.
func (s *Inbox) RelayBatch(ctx context.Context, limit int, b Backoff, start func(ctx context.Context, evs []RecordedEvent) []Settlement) (claimed, settled int, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, qClaimInbox, limit)
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RecordedEvent, error) { return scanRecorded(row) })
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		claimed = len(evs)
		if claimed == 0 {
			return nil
		}
		settled, err = settleStarts(ctx, tx, start(ctx, evs), b)
		return err
	})
	if err != nil {
		return claimed, 0, fmt.Errorf("relay batch: %w", err)
	}
	return claimed, settled, nil
}

// SettleStarts records the outcome of starts made outside a relay batch (by the process that
// accepted the events): started rows leave the inbox, refused ones are quarantined, failed ones
// back off. Rows no longer waiting (a relay or a redrive got there first) are left alone.
func (s *Inbox) SettleStarts(ctx context.Context, out []Settlement, b Backoff) error {
	if _, err := settleStarts(ctx, s.pool, out, b); err != nil {
		return fmt.Errorf("settle starts: %w", err)
	}
	return nil
}

// execer is a transaction or the pool.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// settleStarts returns how many rows left the inbox (started or quarantined).
func settleStarts(ctx context.Context, q execer, out []Settlement, b Backoff) (settled int, err error) {
	var okP, okE, badP, badE, badErr, refP, refE, refErr, unsureP, unsureE, unsureErr []string
	for _, o := range out {
		switch o.Then {
		case MarkStarted:
			okP, okE = append(okP, o.Provider), append(okE, o.EventID)
		case Quarantine:
			refP, refE, refErr = append(refP, o.Provider), append(refE, o.EventID), append(refErr, truncateError(o.Error))
		case RetryLater:
			badP, badE, badErr = append(badP, o.Provider), append(badE, o.EventID), append(badErr, truncateError(o.Error))
		case RetryUncertain:
			unsureP, unsureE, unsureErr = append(unsureP, o.Provider), append(unsureE, o.EventID), append(unsureErr, truncateError(o.Error))
		}
	}
	if len(okP) > 0 {
		if _, err := q.Exec(ctx, qMarkRelayed, okP, okE, make([]string, len(okP))); err != nil {
			return 0, fmt.Errorf("mark started: %w", err)
		}
	}
	if len(refP) > 0 {
		if _, err := q.Exec(ctx, qQuarantineStart, refP, refE, refErr); err != nil {
			return 0, fmt.Errorf("quarantine refused starts: %w", err)
		}
	}
	if len(badP) > 0 {
		if _, err := q.Exec(ctx, qMarkRelayFailed, badP, badE, badErr,
			float64(b.Max.Microseconds()), float64(b.Initial.Microseconds())); err != nil {
			return 0, fmt.Errorf("mark failed starts: %w", err)
		}
	}
	if len(unsureP) > 0 {
		if _, err := q.Exec(ctx, qMarkRelayFailed, unsureP, unsureE, unsureErr,
			float64(b.Max.Microseconds()), float64(b.Max.Microseconds())); err != nil {
			return 0, fmt.Errorf("mark uncertain starts: %w", err)
		}
	}
	return len(okP) + len(refP), nil
}

// maxErrorText bounds an error message kept on a row: the first error is what an operator needs,
// and a wrapped one can repeat a large argument.
const maxErrorText = 2000

func truncateError(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// InFlight counts the events relays started within window whose workflow has not taken them up
// yet (RecordEvent not run).
func (s *Inbox) InFlight(ctx context.Context, window time.Duration) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, qInFlight, window.Microseconds()).Scan(&n); err != nil {
		return 0, fmt.Errorf("in flight: %w", err)
	}
	return n, nil
}
