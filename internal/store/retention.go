package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailhook/mailhook/internal/domain"
)

// Retention (config retention.*, run daily by the Retention workflow). Payloads go a whole time
// partition at a time: a partition whose range ended longer ago than retention.payloads is
// detached and dropped, never emptied by deleting rows (a drop frees the space at once, writes
// no WAL per row and leaves nothing to vacuum). Dedupe keys are rows of the slim webhook_events
// table: those of processed events older than retention.dedupe_keys are deleted in batches,
// with the rows that refer to them. message_events and messages are not touched: a message's
// state and history outlive the keys of the events that made them.

// expired returns the partitions of parts whose whole range ended at or before before.
func expired(parts []domain.Partition, before time.Time) []domain.Partition {
	var out []domain.Partition
	for _, p := range parts {
		if !p.To.After(before) {
			out = append(out, p)
		}
	}
	return out
}

// DDL; %s are sanitized identifiers. DETACH ... CONCURRENTLY takes SHARE UPDATE EXCLUSIVE on
// the parent instead of ACCESS EXCLUSIVE, so inserts and readers of the table go on; it then
// waits for the transactions that use the table, and it cannot run in a transaction block. If
// it is interrupted (a lock timeout, a lost connection), the partition stays "detach pending"
// (pg_inherits.inhdetachpending), no new query reads it, and FINALIZE completes it. It refuses
// to run on a table with a DEFAULT partition, which is why there is none.
const (
	qDetachConcurrently = `ALTER TABLE %s DETACH PARTITION %s CONCURRENTLY`
	qDetachFinalize     = `ALTER TABLE %s DETACH PARTITION %s FINALIZE`
	qDropTable          = `DROP TABLE %s`
	qRelationSize       = `SELECT pg_total_relation_size($1::regclass)`

	// Tables named like table's partitions that are not partitions: detached by a run that
	// stopped before it dropped them. parsePartition checks the whole name.
	qDetachedPartitions = `
SELECT c.relname
FROM pg_class c
WHERE c.relkind = 'r' AND NOT c.relispartition
  AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = $1::regclass)
  AND starts_with(c.relname, $2)`

	// Through the partial webhook_events_unprocessed_idx: only the unprocessed rows are read.
	qUnprocessedIn = `
SELECT count(*), count(quarantined_at)
FROM webhook_events
WHERE processed_at IS NULL AND received_at >= $1 AND received_at < $2`

	// Through the partial notifications_pending_idx (migration 00010) and
	// notifications_parked_idx (00013): only the rows still to be delivered are read.
	qPendingNotificationsIn = `
SELECT count(*)
FROM notifications
WHERE status IN ('pending', 'parked') AND created_at >= $1 AND created_at < $2`
)

// DropExpiredPartitions detaches and drops, table by table, every partition whose range ended
// at or before o.Before, except those still needed (KeptPartition says why, with counts). It
// never deletes rows. Every DDL statement runs on a connection of its own with lock_timeout
// o.LockTimeout; a statement that times out ends the call with an error wrapping
// ErrLockTimeout, and a later call finishes the work (finalizing a detach left pending, dropping
// a table left detached). It is idempotent, and calls that overlap only make one of them time
// out.
func (s *Retention) DropExpiredPartitions(ctx context.Context, o domain.DropOptions) (domain.PartitionReport, error) {
	var rep domain.PartitionReport
	timeout := o.LockTimeout
	if timeout <= 0 {
		timeout = domain.DefaultLockTimeout
	}
	conn, err := s.ddlConn(ctx, timeout)
	if err != nil {
		return rep, fmt.Errorf("drop expired partitions: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	progress := func() {
		if o.Progress != nil {
			o.Progress(rep)
		}
	}
	for _, table := range PartitionedTables {
		detached, err := s.detachedPartitions(ctx, table)
		if err != nil {
			return rep, err
		}
		for _, p := range expired(detached, o.Before) {
			d, err := dropPartition(ctx, conn, p, true)
			if err != nil {
				return rep, err
			}
			rep.Dropped = append(rep.Dropped, d)
			progress()
		}
		parts, err := s.Partitions(ctx, table)
		if err != nil {
			return rep, err
		}
		for _, p := range expired(parts, o.Before) {
			kept, err := s.keep(ctx, p)
			if err != nil {
				return rep, err
			}
			if kept != nil {
				rep.Kept = append(rep.Kept, *kept)
				progress()
				continue
			}
			d, err := dropPartition(ctx, conn, p, false)
			if err != nil {
				return rep, err
			}
			rep.Dropped = append(rep.Dropped, d)
			progress()
		}
	}
	return rep, nil
}

// ErrLockTimeout is wrapped by a retention statement that waited longer than its lock timeout.
var ErrLockTimeout = errors.New("waited longer than the lock timeout (a long transaction on the table?); a later attempt finishes it")

// ddlConn opens a connection of its own, with lock_timeout set, for statements that cannot run
// in a transaction block (so SET LOCAL is not available) and must not change a pooled session.
func (s *Retention) ddlConn(ctx context.Context, lockTimeout time.Duration) (*pgx.Conn, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	if s.sessionURL != "" {
		var err error
		if cfg, err = pgx.ParseConfig(s.sessionURL); err != nil {
			return nil, fmt.Errorf("parse the session url: %w", err)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect for DDL: %w", err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET lock_timeout = %d", max(lockTimeout.Milliseconds(), 1))); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("set lock_timeout: %w", err)
	}
	return conn, nil
}

// detachedPartitions lists the tables named as table's partitions that are not partitions any
// more. Other names are not mailhook's and are left alone.
func (s *Retention) detachedPartitions(ctx context.Context, table string) ([]domain.Partition, error) {
	rows, err := s.pool.Query(ctx, qDetachedPartitions, table, table+"_p")
	if err != nil {
		return nil, fmt.Errorf("list detached partitions of %s: %w", table, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list detached partitions of %s: %w", table, err)
	}
	var out []domain.Partition
	for _, n := range names {
		if p, err := parsePartition(table, n); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// keep says why p must stay although it expired, or nil when it may go.
func (s *Retention) keep(ctx context.Context, p domain.Partition) (*domain.KeptPartition, error) {
	k := domain.KeptPartition{Name: p.Name, From: p.From, To: p.To}
	var err error
	switch p.Table {
	case PayloadsTable:
		err = s.pool.QueryRow(ctx, qUnprocessedIn, p.From, p.To).Scan(&k.Unprocessed, &k.Quarantined)
		if k.Unprocessed > 0 {
			k.Reason = domain.KeptUnprocessed
		}
	case BodiesTable:
		err = s.pool.QueryRow(ctx, qPendingNotificationsIn, p.From, p.To).Scan(&k.PendingNotifications)
		if k.PendingNotifications > 0 {
			k.Reason = domain.KeptPendingNotifications
		}
	default:
		err = errors.New("not a partitioned table of mailhook's")
	}
	if err != nil {
		return nil, fmt.Errorf("check partition %s: %w", p.Name, err)
	}
	if k.Reason == "" {
		return nil, nil
	}
	return &k, nil
}

// dropPartition detaches p (or finalizes its pending detach) and drops it; detached says it
// is no partition any more, only a table to drop.
func dropPartition(ctx context.Context, conn *pgx.Conn, p domain.Partition, detached bool) (domain.DroppedPartition, error) {
	d := domain.DroppedPartition{Name: p.Name, From: p.From, To: p.To, Finalized: p.DetachPending, Leftover: detached}
	parent, child := pgx.Identifier{p.Table}.Sanitize(), pgx.Identifier{p.Name}.Sanitize()
	if err := conn.QueryRow(ctx, qRelationSize, child).Scan(&d.Bytes); err != nil {
		return d, fmt.Errorf("size of %s: %w", p.Name, err)
	}
	if !detached {
		q := qDetachConcurrently
		if p.DetachPending {
			q = qDetachFinalize
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf(q, parent, child)); err != nil {
			return d, fmt.Errorf("detach %s from %s: %w", p.Name, p.Table, lockTimeout(err))
		}
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(qDropTable, child)); err != nil {
		return d, fmt.Errorf("drop %s (detached): %w", p.Name, lockTimeout(err))
	}
	return d, nil
}

// lockTimeout wraps ErrLockTimeout around PostgreSQL's lock_not_available.
func lockTimeout(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return fmt.Errorf("%w: %w", ErrLockTimeout, err)
	}
	return err
}

// One batch of PruneDedupeKeys: $1 the cutoff, $2 the batch size. The keys are found through
// webhook_events_received_at_idx, so a run reads the expired rows only, not the whole key
// table; SKIP LOCKED leaves a row another transaction holds (and never waits, so the order the
// rows are locked in cannot deadlock with the writers) to the next run, and keeps overlapping
// runs apart. With each key go the rows that refer to it: its replays (a foreign key), its
// notifications' state and remaining bodies (and those of replays that re-notified, keyed
// event_id:replay:n), and its payload where a kept partition still holds it; the payload's
// received_at bound lets PostgreSQL read only the partitions before the cutoff.
const qPruneKeys = `
WITH k AS (
    SELECT provider, event_id, received_at
    FROM webhook_events
    WHERE received_at < $1 AND processed_at IS NOT NULL
    ORDER BY received_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), r AS (
    DELETE FROM replays x USING k
    WHERE x.provider = k.provider AND x.event_id = k.event_id
    RETURNING x.provider, x.event_id, x.n, x.renotify
), n AS (
    DELETE FROM notifications x
    USING (SELECT provider, event_id FROM k
           UNION ALL
           SELECT provider, event_id || ':replay:' || n FROM r WHERE renotify) e
    WHERE x.provider = e.provider AND x.event_id = e.event_id
    RETURNING x.id, x.created_at
), b AS (
    DELETE FROM notification_bodies x USING n
    WHERE x.id = n.id AND x.created_at = n.created_at
    RETURNING 1
), p AS (
    DELETE FROM event_payloads x USING k
    WHERE x.provider = k.provider AND x.event_id = k.event_id AND x.received_at = k.received_at
      AND x.received_at < $1
    RETURNING 1
), w AS (
    DELETE FROM webhook_events x USING k
    WHERE x.provider = k.provider AND x.event_id = k.event_id
    RETURNING 1
)
SELECT (SELECT count(*) FROM k), (SELECT count(*) FROM w), (SELECT count(*) FROM r),
       (SELECT count(*) FROM n), (SELECT count(*) FROM b), (SELECT count(*) FROM p)`

// PruneDedupeKeys deletes the keys of processed events received before o.Before, o.Batch per
// statement (each its own transaction, locking only its own rows for milliseconds), with the
// rows that refer to them, until none is left or ctx ends. Unprocessed events keep their keys
// whatever their age. After this a re-delivery of a pruned event is accepted as new. It is
// idempotent, and calls that overlap delete disjoint batches.
func (s *Retention) PruneDedupeKeys(ctx context.Context, o domain.PruneOptions) (domain.PruneReport, error) {
	batch := o.Batch
	if batch <= 0 {
		batch = domain.DefaultPruneBatch
	}
	var rep domain.PruneReport
	for {
		var (
			b        domain.PruneReport
			selected int64
		)
		err := s.pool.QueryRow(ctx, qPruneKeys, o.Before, batch).Scan(
			&selected, &b.Keys, &b.Replays, &b.Notifications, &b.NotificationBodies, &b.Payloads)
		if err != nil {
			return rep, fmt.Errorf("prune dedupe keys before %s: %w", o.Before.Format(time.RFC3339), err)
		}
		b.Batches = 1
		rep.Add(b)
		if o.Progress != nil {
			o.Progress(rep)
		}
		if selected < int64(batch) {
			return rep, nil
		}
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("prune dedupe keys: %w", err)
		}
	}
}
