package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailhook/mailhook/internal/domain"
)

// The tables partitioned by time (migration 00009). Each partition covers whole UTC days, and
// its name says which: <table>_p<YYYYMMDD>_<YYYYMMDD> for [from, to). Reading the range from
// the name, not from pg_get_expr's text, keeps it independent of the session's TimeZone and of
// how PostgreSQL prints bounds.
const (
	PayloadsTable = "event_payloads"
	BodiesTable   = "notification_bodies"
)

// PartitionedTables lists every table partitioned by time.
var PartitionedTables = []string{PayloadsTable, BodiesTable}

// DefaultPartitioning is monthly, three months ahead.
var DefaultPartitioning = domain.Partitioning{Ahead: 3}

var partitionName = regexp.MustCompile(`^(.+)_p(\d{8})_(\d{8})$`)

func nameOf(table string, from, to time.Time) string {
	return fmt.Sprintf("%s_p%s_%s", table, from.Format("20060102"), to.Format("20060102"))
}

// period returns the partition period that holds t: its UTC day or month.
func period(p domain.Partitioning, t time.Time) (time.Time, time.Time) {
	t = t.UTC()
	if p.Daily {
		from := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return from, from.AddDate(0, 0, 1)
	}
	from := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return from, from.AddDate(0, 1, 0)
}

const qPartitions = `
SELECT c.relname, i.inhdetachpending
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = $1::regclass`

// Partitions lists table's partitions in time order.
func (s *Retention) Partitions(ctx context.Context, table string) ([]domain.Partition, error) {
	rows, err := s.pool.Query(ctx, qPartitions, table)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	var out []domain.Partition
	var (
		name    string
		pending bool
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &pending}, func() error {
		p, err := parsePartition(table, name)
		if err != nil {
			return err
		}
		p.DetachPending = pending
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	slices.SortFunc(out, func(a, b domain.Partition) int { return a.From.Compare(b.From) })
	return out, nil
}

// parsePartition reads a partition of table, and its range, from its name.
func parsePartition(table, name string) (domain.Partition, error) {
	m := partitionName.FindStringSubmatch(name)
	if m == nil || m[1] != table {
		return domain.Partition{}, fmt.Errorf("partition %s of %s is not named <table>_p<from>_<to>: mailhook did not create it", name, table)
	}
	from, err1 := time.Parse("20060102", m[2])
	to, err2 := time.Parse("20060102", m[3])
	if err := errors.Join(err1, err2); err != nil || !from.Before(to) {
		return domain.Partition{}, fmt.Errorf("partition %s of %s: bad range in its name", name, table)
	}
	return domain.Partition{Table: table, Name: name, From: from, To: to}, nil
}

// gaps returns the parts of [from, to) that no partition in parts (sorted) covers.
func gaps(parts []domain.Partition, from, to time.Time) [][2]time.Time {
	var out [][2]time.Time
	at := from
	for _, p := range parts {
		if !p.To.After(at) {
			continue
		}
		if !p.From.Before(to) {
			break
		}
		if p.From.After(at) {
			out = append(out, [2]time.Time{at, p.From})
		}
		at = p.To
		if !at.Before(to) {
			return out
		}
	}
	if at.Before(to) {
		out = append(out, [2]time.Time{at, to})
	}
	return out
}

// EnsurePartitions creates the partitions every partitioned table needs for times in
// [from, now + p.Ahead periods]: the period holding each time, except where existing
// partitions already cover it, whose gaps are filled with partitions of their own exact size.
// So a change from monthly to daily (or back) never overlaps what exists. It is idempotent and
// safe to run concurrently (a lost race is "already exists", and the next run sees it). It
// returns the partitions it created.
func (s *Retention) EnsurePartitions(ctx context.Context, p domain.Partitioning, from, now time.Time) ([]domain.Partition, error) {
	start, _ := period(p, from)
	_, end := period(p, now)
	for range p.Ahead {
		_, end = period(p, end)
	}
	var created []domain.Partition
	for _, table := range PartitionedTables {
		existing, err := s.Partitions(ctx, table)
		if err != nil {
			return created, err
		}
		for _, g := range gaps(existing, start, end) {
			// Split each gap at period boundaries, so partitions stay period-sized.
			for at := g[0]; at.Before(g[1]); {
				_, next := period(p, at)
				if next.After(g[1]) {
					next = g[1]
				}
				part := domain.Partition{Table: table, Name: nameOf(table, at, next), From: at, To: next}
				ok, err := s.createPartition(ctx, part)
				if err != nil {
					return created, err
				}
				if ok {
					created = append(created, part)
				}
				at = next
			}
		}
	}
	return created, nil
}

func (s *Retention) createPartition(ctx context.Context, p domain.Partition) (bool, error) {
	// CREATE TABLE ... PARTITION OF takes an ACCESS EXCLUSIVE lock on the parent: queued behind
	// any open reader of the table, it holds every insert behind it for as long (measured: an
	// insert waited the 2.3 s a reader stayed open). A table of its own, attached, needs only
	// SHARE UPDATE EXCLUSIVE on the parent, which neither readers nor inserts conflict with. The
	// explicit lock, of that same mode, makes concurrent creators take turns, so the later one
	// finds the table (42P07) instead of racing on the catalog's unique indexes; one transaction,
	// so there is never a table of that name that is not a partition. Bounds with an explicit
	// +00: the session's TimeZone does not move them.
	name, parent := pgx.Identifier{p.Name}.Sanitize(), pgx.Identifier{p.Table}.Sanitize()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, q := range []string{
			`LOCK TABLE ` + parent + ` IN SHARE UPDATE EXCLUSIVE MODE`,
			fmt.Sprintf(`CREATE TABLE %s (LIKE %s INCLUDING ALL)`, name, parent),
			fmt.Sprintf(`ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')`, parent, name,
				p.From.Format("2006-01-02 15:04:05+00"), p.To.Format("2006-01-02 15:04:05+00")),
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P07" || pgErr.Code == "42P17") {
		// 42P07: another process created it first. 42P17: it would overlap one another process
		// created meanwhile, of another size; the next run fills what is left.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create partition %s: %w", p.Name, err)
	}
	return true, nil
}

// isNoPartition reports whether err is PostgreSQL's "no partition of relation ... found for
// row": the insert needs a partition nobody created yet. It is not the data's fault, so it is
// not a data error; the store creates the partition and tries again. It is told by its fields,
// never by its text, which lc_messages translates: a check violation (23514) that names no
// constraint, on one of the partitioned tables (a CHECK constraint's violation names it).
func isNoPartition(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == "" &&
		(pgErr.TableName == "event_payloads" || pgErr.TableName == "notification_bodies")
}

// withPartitions runs write and, when it failed for want of a partition, creates the
// partitions around now and runs it once more. Partitions are made ahead at every start and
// every retention run, so this is the fallback for a clock that jumped or a schedule that did
// not run for months.
func withPartitions(ctx context.Context, s *db, write func() error) error {
	err := write()
	if !isNoPartition(err) {
		return err
	}
	now := time.Now()
	if _, perr := (&Retention{s}).EnsurePartitions(ctx, s.partitioning, now.AddDate(0, 0, -1), now); perr != nil {
		return errors.Join(missingPartition{err}, perr)
	}
	if err = write(); isNoPartition(err) {
		return missingPartition{err}
	}
	return err
}

// missingPartition is a missing partition that outlived withPartitions: the schema's want, not
// the data's, so its SQLSTATE (23514, which domain.IsDataError would read as the data's) is not
// shown to those that classify it; a retry may find the partition there.
type missingPartition struct{ error }

func (missingPartition) SQLState() string { return "" }

func (m missingPartition) Unwrap() error { return m.error }
