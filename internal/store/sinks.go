package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
)

// A sink's health and its parked notifications (migrations 00012 and 00013). The rules these
// statements apply (when a circuit opens, why a notification parks, the drain's order) are
// internal/delivery's; the statements keep each transition to one row update, so the workers and
// the drainer that race on a sink never lose one.

// SinkLimit is what EnsureSinks keeps of a configured sink: its name and how many requests may be
// in flight to it at once (0: no bound, no slots).
type SinkLimit struct {
	Name        string
	Concurrency int
}

// EnsureSinks creates the rows of the configured sinks that have none, and sizes each one's
// slots (sink_slots) to its concurrency. Every worker runs it at start; concurrent runs agree.
// Rows of sinks no longer configured stay, with their parked notifications, until a config
// names them again.
func (s *Sinks) EnsureSinks(ctx context.Context, sinks []SinkLimit) error {
	for _, sk := range sinks {
		if _, err := s.pool.Exec(ctx, qEnsureSink, sk.Name, max(sk.Concurrency, 0)); err != nil {
			return fmt.Errorf("ensure sink %s: %w", sk.Name, err)
		}
	}
	return nil
}

// SinkByName reads one sink with its counts; domain.ErrNotFound when it has no row.
func (s *Sinks) SinkByName(ctx context.Context, name string) (delivery.Sink, error) {
	sk, err := scanSink(s.pool.QueryRow(ctx, qSink, name))
	if err != nil {
		return delivery.Sink{}, fmt.Errorf("sink %s: %w", name, err)
	}
	return sk, nil
}

// ListSinks reads every sink with its counts, by name.
func (s *Sinks) ListSinks(ctx context.Context) ([]delivery.Sink, error) {
	rows, err := s.pool.Query(ctx, qListSinks)
	if err != nil {
		return nil, fmt.Errorf("list sinks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (delivery.Sink, error) { return scanSink(row) })
	if err != nil {
		return nil, fmt.Errorf("list sinks: %w", err)
	}
	return out, nil
}

// ParkNotification parks a pending notification of sink for the sink's drainer with why
// (delivery.Reason*). notBefore, when set, is the sink's own Retry-After: nothing is sent to it
// before then.
//
// A park that found the sink draining wakes nobody, but its drain may be closing it meanwhile:
// the drainer's Settle found nothing parked in a snapshot taken before this park committed,
// and closed the sink. Nobody would send the notification before the drainer's next look by
// itself (workflows.IdleCheck, minutes later). So such a park reads the sink again once it has
// committed, waiting for a close in flight (Settle holds the row), and a sink it finds closed
// is settled (to draining, since this notification is parked) and its drainer woken: a wake
// only where a close raced a park, never one per parked notification.
func (s *Sinks) ParkNotification(ctx context.Context, id, sink, why string, notBefore time.Time) (delivery.Parked, error) {
	var (
		p    delivery.Parked
		seen *string
	)
	if err := s.pool.QueryRow(ctx, qParkNotification, id, why).Scan(&p.Parked, &p.Woke, &seen); err != nil {
		return delivery.Parked{}, fmt.Errorf("park notification %s: %w", id, err)
	}
	if p.Parked && !p.Woke && seen != nil && delivery.State(*seen) == delivery.Draining {
		woke, err := s.closedMeanwhile(ctx, sink)
		if err != nil {
			return p, fmt.Errorf("park notification %s: %w", id, err)
		}
		p.Woke = woke
	}
	if !notBefore.IsZero() {
		if err := s.SlowDown(ctx, sink, notBefore); err != nil {
			return p, err
		}
	}
	return p, nil
}

// closedMeanwhile settles a sink that a park found draining and that is closed now (its drain
// closed it while the park was in flight); true when the sink drains again and its drainer must
// be woken. FOR KEY SHARE waits for a Settle that holds the row (FOR UPDATE) to commit, and
// then reads what it left.
func (s *Sinks) closedMeanwhile(ctx context.Context, sink string) (bool, error) {
	var state string
	err := s.pool.QueryRow(ctx, qSinkStateShared, sink).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && delivery.State(state) != delivery.Closed) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read sink %s after parking: %w", sink, err)
	}
	now, err := s.Settle(ctx, sink)
	if err != nil {
		return false, err
	}
	return now == delivery.Draining, nil
}

// DeliveryFailed records a failed attempt of notification id, on the row (errMsg) and on its
// sink (sinkErr, the status line without the sink's answer), and opens the sink's circuit when
// that makes threshold failures in a row (opened; the drainer probes it after probeIn).
func (s *Sinks) DeliveryFailed(ctx context.Context, id, sink, errMsg, sinkErr string, threshold int, probeIn time.Duration) (opened bool, err error) {
	if err := s.pool.QueryRow(ctx, qDeliveryFailed, id, sink, errMsg, threshold, probeIn, sinkErr).Scan(&opened); err != nil {
		return false, fmt.Errorf("record failed attempt of %s to sink %s: %w", id, sink, err)
	}
	return opened, nil
}

// TakeToken takes one request from the sink's token bucket (rate requests a second, at most a
// tenth of a second's worth saved up, and at least one), shared by every worker through the
// sink's row: false when none is left now. So no second holds more than rate plus a tenth of it
// (plus one below 10/s).
func (s *Sinks) TakeToken(ctx context.Context, sink string, rate float64) (bool, error) {
	burst := max(rate/10, 1)
	tag, err := s.pool.Exec(ctx, qTakeToken, sink, rate, burst)
	if err != nil {
		return false, fmt.Errorf("sink %s rate limit: %w", sink, err)
	}
	return tag.RowsAffected() == 1, nil
}

// AcquireSlot leases one of the sink's concurrency slots until hold has passed: false when every
// slot is held. A worker that dies holding one loses it when the lease ends.
func (s *Sinks) AcquireSlot(ctx context.Context, sink string, hold time.Duration) (slot int, ok bool, err error) {
	err = s.pool.QueryRow(ctx, qAcquireSlot, sink, hold).Scan(&slot)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("sink %s concurrency slot: %w", sink, err)
	}
	return slot, true, nil
}

// ReleaseSlot gives a slot back.
func (s *Sinks) ReleaseSlot(ctx context.Context, sink string, slot int) error {
	if _, err := s.pool.Exec(ctx, qReleaseSlot, sink, slot); err != nil {
		return fmt.Errorf("release sink %s slot %d: %w", sink, slot, err)
	}
	return nil
}

// ParkedBatch returns the next notifications the sink's drain sends: the limit parked longest,
// plus every other parked update of the messages among them, so that a drain that takes one of
// a message's updates takes all of them (and sends them in version order: delivery.Chains).
func (s *Sinks) ParkedBatch(ctx context.Context, sink string, limit int) ([]delivery.ParkedNotification, error) {
	rows, err := s.pool.Query(ctx, qParkedBatch, sink, limit)
	if err != nil {
		return nil, fmt.Errorf("parked notifications of sink %s: %w", sink, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (delivery.ParkedNotification, error) {
		var (
			p    delivery.ParkedNotification
			body []byte
		)
		err := row.Scan(&p.ID, &p.Provider, &p.EventID, &p.Type, &p.MessageID, &p.Version, &p.Attempts,
			&p.ParkedAt, &p.CreatedAt, &body)
		p.Body = body
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("parked notifications of sink %s: %w", sink, err)
	}
	return out, nil
}

// DrainedSent marks a parked notification sent by the drain (its sink's run of failures ends
// with it). An inbound email's body goes with its last notification when
// retention.inbound_bodies is 0, as it would have when its event was processed.
func (s *Sinks) DrainedSent(ctx context.Context, n delivery.ParkedNotification) error {
	if err := (&Notifications{s.db}).MarkNotificationSent(ctx, n.ID); err != nil {
		return err
	}
	if s.stripOnProcessed && n.Type == domain.TypeEmailReceived {
		if _, err := s.pool.Exec(ctx, qStripInboundEvent, n.Provider, n.EventID); err != nil {
			return fmt.Errorf("remove the inbound body of %s:%s: %w", n.Provider, n.EventID, err)
		}
	}
	return nil
}

// DrainedSentAll is DrainedSent for a batch a broker confirmed: one statement for every mark,
// and one for the inbound bodies that may go.
func (s *Sinks) DrainedSentAll(ctx context.Context, ns []delivery.ParkedNotification) error {
	ids := make([]string, len(ns))
	var inbound []delivery.ParkedNotification
	for i, n := range ns {
		ids[i] = n.ID
		if s.stripOnProcessed && n.Type == domain.TypeEmailReceived {
			inbound = append(inbound, n)
		}
	}
	if _, err := s.pool.Exec(ctx, qMarkNotificationsSent, ids); err != nil {
		return fmt.Errorf("mark %d notifications sent: %w", len(ids), err)
	}
	for _, n := range inbound {
		if _, err := s.pool.Exec(ctx, qStripInboundEvent, n.Provider, n.EventID); err != nil {
			return fmt.Errorf("remove the inbound body of %s:%s: %w", n.Provider, n.EventID, err)
		}
	}
	return nil
}

// GiveUpParked fails the sink's notifications parked before before (notify.give_up_after) and
// returns how many, in batches of bounded transactions.
func (s *Sinks) GiveUpParked(ctx context.Context, sink string, before time.Time, reason string) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, qGiveUpParked, sink, before, reason, sinkBatch)
		if err != nil {
			return total, fmt.Errorf("give up parked notifications of sink %s: %w", sink, err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < sinkBatch {
			return total, nil
		}
	}
}

// sinkBatch bounds the rows one statement of a sink's bulk changes touches.
const sinkBatch = 5000

// SinkFailing records that the drainer's probe or drain failed: the circuit is (again) open,
// and the next probe is at nextProbe. failedProbe counts it as one more failed probe.
func (s *Sinks) SinkFailing(ctx context.Context, sink, errMsg string, failedProbe bool, nextProbe time.Time) error {
	if _, err := s.pool.Exec(ctx, qSinkFailing, sink, errMsg, failedProbe, nextProbe); err != nil {
		return fmt.Errorf("sink %s failing: %w", sink, err)
	}
	return nil
}

// SinkAnswers records that the sink answered the drainer again: an open circuit goes to draining
// (the parked notifications are sent next), and the failure counts start over.
func (s *Sinks) SinkAnswers(ctx context.Context, sink string) error {
	if _, err := s.pool.Exec(ctx, qSinkAnswers, sink); err != nil {
		return fmt.Errorf("sink %s answers: %w", sink, err)
	}
	return nil
}

// SlowDown records the sink's Retry-After: nothing is sent to it before until.
func (s *Sinks) SlowDown(ctx context.Context, sink string, until time.Time) error {
	if _, err := s.pool.Exec(ctx, qSlowDown, sink, until); err != nil {
		return fmt.Errorf("sink %s slow down: %w", sink, err)
	}
	return nil
}

// Settle puts a sink whose state no longer matches its backlog right: a draining sink with
// nothing parked closes (its notifications are sent by their runs again), a closed one with
// parked notifications (a park that raced the close, a redelivery) drains. It returns the state
// it left.
//
// The row is locked before the statement that looks at the backlog takes its snapshot: a park
// that commits after that snapshot (and so is not seen: the sink may close) then reads the sink
// only once this has committed, and finds it closed (ParkNotification).
func (s *Sinks) Settle(ctx context.Context, sink string) (delivery.State, error) {
	// A sink no worker has set up yet (EnsureSinks) gets its row: its state is kept there.
	if _, err := s.pool.Exec(ctx, qEnsureSinkRow, sink); err != nil {
		return "", fmt.Errorf("settle sink %s: %w", sink, err)
	}
	var state string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, qLockSink, sink); err != nil {
			return err
		}
		return tx.QueryRow(ctx, qSettle, sink).Scan(&state)
	})
	if err != nil {
		return "", fmt.Errorf("settle sink %s: %w", sink, err)
	}
	return delivery.State(state), nil
}

// PauseSink pauses (or resumes) a sink: while paused every notification for it parks and its
// drainer sends nothing. by is the admin token's name. A resumed sink with parked notifications
// drains them.
func (s *Sinks) PauseSink(ctx context.Context, sink string, paused bool, by string) (delivery.Sink, error) {
	if _, err := s.pool.Exec(ctx, qPauseSink, sink, paused, by); err != nil {
		return delivery.Sink{}, fmt.Errorf("pause sink %s: %w", sink, err)
	}
	if !paused {
		if _, err := s.Settle(ctx, sink); err != nil {
			return delivery.Sink{}, err
		}
	}
	return s.SinkByName(ctx, sink)
}

// RedeliverFilter selects the notifications of one sink to send again.
type RedeliverFilter struct {
	Sink string
	// Since and Until bound the notifications' creation time (zero: unbounded).
	Since, Until time.Time
	// Provider and Type, when set, keep only that provider's events and that notification type.
	Provider, Type string
	// Statuses are the statuses to redeliver: failed, parked, sent.
	Statuses []string
	// DryRun counts and changes nothing.
	DryRun bool
}

// Redelivery is what Redeliver did (or would do, in a dry run).
type Redelivery struct {
	Matched int64 `json:"matched"`
	// Requeued were parked for the drainer, under their ids (0 in a dry run).
	Requeued int64 `json:"requeued"`
	// AlreadyParked were waiting for the drainer already.
	AlreadyParked int64 `json:"already_parked"`
	// Unavailable cannot be sent again under their id: retention removed their body (or an
	// inbound email's body once it was delivered).
	Unavailable int64 `json:"unavailable"`
	// Woke: the sink went from closed to draining, and its drainer must be woken.
	Woke bool `json:"-"`
}

// Redeliver parks the notifications f selects again, under their ids and with their stored
// bodies, for the sink's drainer: a receiver that already had one dedupes it. It walks them in
// id order in bounded transactions, so a large selection never holds one long transaction.
func (s *Sinks) Redeliver(ctx context.Context, f RedeliverFilter) (Redelivery, error) {
	var (
		res  Redelivery
		last string
	)
	for {
		var matched, requeued, parked, unavailable int64
		var next *string
		err := s.pool.QueryRow(ctx, qRedeliver, f.Sink, f.Statuses, last, nullTime(f.Since), nullTime(f.Until),
			f.Provider, f.Type, sinkBatch, f.DryRun).Scan(&matched, &requeued, &parked, &unavailable, &next)
		if err != nil {
			return res, fmt.Errorf("redeliver notifications of sink %s: %w", f.Sink, err)
		}
		res.Matched += matched
		res.Requeued += requeued
		res.AlreadyParked += parked
		res.Unavailable += unavailable
		if next == nil || matched < sinkBatch {
			break
		}
		last = *next
	}
	if res.Requeued > 0 {
		state, err := s.Settle(ctx, f.Sink)
		if err != nil {
			return res, err
		}
		res.Woke = state == delivery.Draining
	}
	return res, nil
}

// SinkNotificationFilter selects a page of one sink's notifications.
type SinkNotificationFilter struct {
	Sink   string
	Status string // pending, parked, sent or failed
	After  string // the last id of the previous page
	Limit  int
}

// ListSinkNotifications returns a page of a sink's notifications of one status, in id order
// (without their bodies), and the id to pass as After for the next page ("" on the last).
func (s *Sinks) ListSinkNotifications(ctx context.Context, f SinkNotificationFilter) ([]delivery.Notification, string, error) {
	rows, err := s.pool.Query(ctx, qListSinkNotifications, f.Sink, f.Status, f.After, f.Limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("notifications of sink %s: %w", f.Sink, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (delivery.Notification, error) {
		n, err := scanNotification(row)
		n.Body = nil
		return n, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("notifications of sink %s: %w", f.Sink, err)
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

func scanSink(row pgx.Row) (delivery.Sink, error) {
	var (
		sk    delivery.Sink
		state string
	)
	err := row.Scan(&sk.Name, &state, &sk.Paused, &sk.PausedAt, &sk.PausedBy, &sk.ConsecutiveFailures, &sk.OpenedAt,
		&sk.ProbeFailures, &sk.NextProbeAt, &sk.NotBefore, &sk.LastError, &sk.LastErrorAt, &sk.UpdatedAt,
		&sk.Parked, &sk.OldestParkedAt, &sk.Failed)
	if errors.Is(err, pgx.ErrNoRows) {
		return delivery.Sink{}, domain.ErrNotFound
	}
	sk.State = delivery.State(state)
	return sk, err
}

const (
	// The row, and as many slots as the concurrency (none without one); slots beyond it go.
	qEnsureSink = `
WITH s AS (
    INSERT INTO sinks (name) VALUES ($1) ON CONFLICT (name) DO NOTHING
), slots AS (
    INSERT INTO sink_slots (sink, slot) SELECT $1, g FROM generate_series(0, $2::int - 1) g
    ON CONFLICT DO NOTHING
)
DELETE FROM sink_slots WHERE sink = $1 AND slot >= $2::int`

	qEnsureSinkRow = `INSERT INTO sinks (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`

	sinkColumns = `s.name, s.state, s.paused, s.paused_at, COALESCE(s.paused_by, ''), s.consecutive_failures,
       s.opened_at, s.probe_failures, s.next_probe_at, s.not_before, COALESCE(s.last_error, ''),
       s.last_error_at, s.updated_at,
       (SELECT count(*) FROM notifications n WHERE n.sink = s.name AND n.status = 'parked'),
       (SELECT min(n.parked_at) FROM notifications n WHERE n.sink = s.name AND n.status = 'parked'),
       (SELECT count(*) FROM notifications n WHERE n.sink = s.name AND n.status = 'failed')`

	qSink      = `SELECT ` + sinkColumns + ` FROM sinks s WHERE s.name = $1`
	qListSinks = `SELECT ` + sinkColumns + ` FROM sinks s ORDER BY s.name`

	// A closed sink goes to draining with its first parked notification (woke: its drainer must
	// hear of it); an open or draining one is left alone, so parks during an outage do not all
	// write the sink's row. A sink without a row (none configured it yet) gets one.
	// Not an upsert: ON CONFLICT DO UPDATE locks the row even when its WHERE is false, and every
	// park during an outage would queue on the sink's row.
	// The third column is the sink's state as the park found it (before its own change; NULL
	// without a row): a park that found it draining looks again once committed.
	qParkNotification = `
WITH n AS (
    UPDATE notifications
    SET status = 'parked', parked_at = now(), park_reason = $2, updated_at = now()
    WHERE id = $1 AND status = 'pending'
    RETURNING sink
), s AS (
    UPDATE sinks SET state = 'draining', updated_at = now()
    FROM n
    WHERE sinks.name = n.sink AND sinks.state = 'closed'
    RETURNING sinks.name
), i AS (
    INSERT INTO sinks (name, state)
    SELECT sink, 'draining' FROM n WHERE NOT EXISTS (SELECT 1 FROM sinks WHERE sinks.name = n.sink)
    ON CONFLICT (name) DO NOTHING
    RETURNING name
)
SELECT EXISTS (SELECT 1 FROM n), EXISTS (SELECT 1 FROM s) OR EXISTS (SELECT 1 FROM i),
       (SELECT sinks.state FROM sinks JOIN n ON sinks.name = n.sink)`

	// The sink's state once every Settle holding its row (qLockSink) has committed.
	qSinkStateShared = `SELECT state FROM sinks WHERE name = $1 FOR KEY SHARE`

	// Settle's lock, taken before its look at the backlog (see Settle).
	qLockSink = `SELECT 1 FROM sinks WHERE name = $1 FOR UPDATE`

	// The failure counts on the notification and on its sink; a closed sink opens at threshold
	// ($4) failures in a row, and its first probe is due $5 later. opened is true only for the
	// statement that opened it. A sink without a row (EnsureSinks failed at the worker's start,
	// or has not run) gets one with its first failure, as with its first park: without it the
	// failures were not counted and its circuit never opened from them.
	qDeliveryFailed = `
WITH n AS (
    UPDATE notifications
    SET attempts = attempts + 1,
        last_error = CASE WHEN status IN ('pending', 'parked') THEN NULLIF($3, '') ELSE last_error END,
        updated_at = now()
    WHERE id = $1
), old AS (
    SELECT state FROM sinks WHERE name = $2 FOR UPDATE
), s AS (
    UPDATE sinks
    SET consecutive_failures = sinks.consecutive_failures + 1,
        last_error = NULLIF($6, ''), last_error_at = now(),
        state = CASE WHEN sinks.state = 'closed' AND sinks.consecutive_failures + 1 >= $4 THEN 'open' ELSE sinks.state END,
        opened_at = CASE WHEN sinks.state = 'closed' AND sinks.consecutive_failures + 1 >= $4 THEN now() ELSE sinks.opened_at END,
        probe_failures = CASE WHEN sinks.state = 'closed' AND sinks.consecutive_failures + 1 >= $4 THEN 0 ELSE sinks.probe_failures END,
        next_probe_at = CASE WHEN sinks.state = 'closed' AND sinks.consecutive_failures + 1 >= $4 THEN now() + $5::interval ELSE sinks.next_probe_at END,
        updated_at = now()
    FROM old
    WHERE sinks.name = $2
    RETURNING old.state = 'closed' AND sinks.state = 'open' AS opened
), i AS (
    INSERT INTO sinks (name, consecutive_failures, last_error, last_error_at, state, opened_at, next_probe_at)
    SELECT $2, 1, NULLIF($6, ''), now(),
           CASE WHEN 1 >= $4 THEN 'open' ELSE 'closed' END,
           CASE WHEN 1 >= $4 THEN now() END,
           CASE WHEN 1 >= $4 THEN now() + $5::interval END
    WHERE NOT EXISTS (SELECT 1 FROM old)
    ON CONFLICT (name) DO NOTHING
    RETURNING state = 'open' AS opened
)
SELECT COALESCE((SELECT opened FROM s), (SELECT opened FROM i), false)`

	// The bucket holds at most $3 tokens and fills at $2 a second; clock_timestamp, not now():
	// the time of this statement, whatever transaction it is in.
	qTakeToken = `
WITH t AS (SELECT clock_timestamp() AS at)
UPDATE sinks s
SET tokens = least($3::float8, COALESCE(s.tokens, $3::float8) + extract(epoch FROM t.at - COALESCE(s.tokens_at, t.at)) * $2::float8) - 1,
    tokens_at = t.at
FROM t
WHERE s.name = $1
  AND least($3::float8, COALESCE(s.tokens, $3::float8) + extract(epoch FROM t.at - COALESCE(s.tokens_at, t.at)) * $2::float8) >= 1`

	qAcquireSlot = `
UPDATE sink_slots
SET held_until = clock_timestamp() + $2::interval
WHERE (sink, slot) = (
    SELECT sink, slot FROM sink_slots
    WHERE sink = $1 AND held_until < clock_timestamp()
    ORDER BY slot LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING slot`

	qReleaseSlot = `UPDATE sink_slots SET held_until = '-infinity' WHERE sink = $1 AND slot = $2`

	// The $2 parked longest (notifications_parked_idx), and the other parked updates of their
	// messages (notifications_parked_message_idx), oldest parked first.
	qParkedBatch = `
WITH b AS (
    SELECT id, provider, message_id FROM notifications
    WHERE sink = $1 AND status = 'parked'
    ORDER BY parked_at, id
    LIMIT $2
), ids AS (
    SELECT id FROM b
    UNION
    SELECT n.id FROM notifications n
    JOIN (SELECT DISTINCT provider, message_id FROM b WHERE message_id IS NOT NULL) m
      ON n.provider = m.provider AND n.message_id = m.message_id
    WHERE n.sink = $1 AND n.status = 'parked'
)
SELECT n.id, n.provider, n.event_id, n.type, COALESCE(n.message_id, ''), COALESCE(n.version, 0), n.attempts,
       n.parked_at, n.created_at, COALESCE(b.body, n.body)
FROM ids JOIN notifications n ON n.id = ids.id
LEFT JOIN notification_bodies b ON b.id = n.id AND b.created_at = n.created_at
ORDER BY n.parked_at, n.id`

	qGiveUpParked = `
UPDATE notifications
SET status = 'failed', last_error = $3, updated_at = now()
WHERE id IN (
    SELECT id FROM notifications
    WHERE sink = $1 AND status = 'parked' AND parked_at < $2
    LIMIT $4)`

	qSinkFailing = `
UPDATE sinks
SET state = 'open',
    opened_at = CASE WHEN state = 'open' THEN opened_at ELSE now() END,
    consecutive_failures = consecutive_failures + 1,
    probe_failures = CASE WHEN $3 THEN probe_failures + 1 WHEN state = 'open' THEN probe_failures ELSE 0 END,
    next_probe_at = $4, last_error = NULLIF($2, ''), last_error_at = now(), updated_at = now()
WHERE name = $1`

	qSinkAnswers = `
UPDATE sinks
SET state = CASE WHEN state = 'open' THEN 'draining' ELSE state END,
    consecutive_failures = 0, probe_failures = 0, next_probe_at = NULL, updated_at = now()
WHERE name = $1`

	qSlowDown = `
UPDATE sinks SET not_before = greatest(not_before, $2::timestamptz), updated_at = now()
WHERE name = $1`

	qSettle = `
UPDATE sinks s
SET state = CASE
        WHEN s.state = 'draining' AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.sink = s.name AND n.status = 'parked')
            THEN 'closed'
        WHEN s.state = 'closed' AND EXISTS (SELECT 1 FROM notifications n WHERE n.sink = s.name AND n.status = 'parked')
            THEN 'draining'
        ELSE s.state END,
    updated_at = now()
WHERE s.name = $1
RETURNING s.state`

	qPauseSink = `
INSERT INTO sinks (name, paused, paused_at, paused_by) VALUES ($1, $2, CASE WHEN $2 THEN now() END, CASE WHEN $2 THEN $3 END)
ON CONFLICT (name) DO UPDATE
SET paused = $2,
    paused_at = CASE WHEN $2 THEN COALESCE(CASE WHEN sinks.paused THEN sinks.paused_at END, now()) END,
    paused_by = CASE WHEN $2 THEN $3 END,
    updated_at = now()`

	// One chunk of a redelivery: the next $8 matching notifications by id. A parked one is left
	// where it is in the queue; one whose body is gone (retention, or an inbound email's body
	// removed once delivered) cannot be sent again under its id.
	qRedeliver = `
WITH c AS (
    SELECT n.id, n.status,
           COALESCE(b.body, n.body) IS NOT NULL AND NOT COALESCE(b.body, n.body) ? 'body_removed_at' AS usable
    FROM notifications n
    LEFT JOIN notification_bodies b ON b.id = n.id AND b.created_at = n.created_at
    WHERE n.sink = $1 AND n.status = ANY($2::text[]) AND n.id > $3
      AND ($4::timestamptz IS NULL OR n.created_at >= $4) AND ($5::timestamptz IS NULL OR n.created_at < $5)
      AND ($6 = '' OR n.provider = $6) AND ($7 = '' OR n.type = $7)
    ORDER BY n.id
    LIMIT $8
), u AS (
    UPDATE notifications n
    SET status = 'parked', parked_at = now(), park_reason = '` + delivery.ReasonRedelivery + `', updated_at = now()
    FROM c
    WHERE n.id = c.id AND c.usable AND c.status <> 'parked' AND NOT $9
    RETURNING n.id
)
SELECT count(*),
       (SELECT count(*) FROM u),
       count(*) FILTER (WHERE status = 'parked'),
       count(*) FILTER (WHERE NOT usable AND status <> 'parked'),
       max(id)
FROM c`

	qListSinkNotifications = `
SELECT ` + notificationColumns + `
FROM ` + notificationFrom + `
WHERE n.sink = $1 AND n.status = $2 AND n.id > $3
ORDER BY n.id
LIMIT $4`
)

// A backlog parked during an outage is invisible to the planner until the next ANALYZE: the
// table's statistics say next to nothing of the sink is parked, so ParkedBatch's join of a
// batch's messages with their other parked updates becomes a nested loop over the whole
// backlog, once per message (seen: 1 s per batch of 1000 with 20,000 parked, against 15 ms
// with fresh statistics). Autovacuum analyzes only once a tenth of the table has changed,
// which takes hours on a table of millions.
const staleParkedMin = 1000

// FreshenParkedStats analyzes notifications when parked, the sink's backlog a drain is about
// to read, is large and more than four times what the planner expects to find (asked with
// EXPLAIN). It reports whether it did. A lock it cannot get within two seconds (autovacuum at
// work on the table) skips it.
func (s *Sinks) FreshenParkedStats(ctx context.Context, sink string, parked int64) (bool, error) {
	if parked < staleParkedMin {
		return false, nil
	}
	var plan []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	var raw []byte
	if err := s.pool.QueryRow(ctx, qParkedEstimate, sink).Scan(&raw); err != nil {
		return false, fmt.Errorf("ask the planner about parked notifications: %w", err)
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) == 0 {
		return false, fmt.Errorf("read the planner's estimate of parked notifications: %v", err)
	}
	if plan[0].Plan.Rows*4 >= float64(parked) {
		return false, nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '2s'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `ANALYZE notifications`)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("analyze notifications: %w", err)
	}
	return true, nil
}

// qParkedEstimate is EXPLAIN's estimate of the sink's parked notifications; the sink's name is
// a literal in the plan's text, never in the result.
const qParkedEstimate = `EXPLAIN (FORMAT JSON) SELECT 1 FROM notifications WHERE sink = $1 AND status = 'parked'`
