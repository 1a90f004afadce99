package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// Statements, as pg_stat_activity shows them: the store's inserts, and DDL.
const (
	inserts = `^\s*WITH`
	ddl     = `^(CREATE|ALTER|DROP) TABLE`
)

// lockWaiter reports whether a backend of this database runs a statement matching pattern and
// waits for a heavyweight lock.
func lockWaiter(t *testing.T, s *store.Store, pattern string) bool {
	t.Helper()
	return readerWaiter(t, s.Pool(), pattern, 0)
}

// readerWaiter is lockWaiter for a lock that backend reader holds or waits for ahead of it
// (pg_blocking_pids); 0: any lock. Statements a test runs side by side may wait for each other
// a moment on a starved machine (a catalog's extension lock: CI once saw one of the DDL of four
// concurrent partition creators wait so), which says nothing of a long reader.
func readerWaiter(t *testing.T, db *pgxpool.Pool, pattern string, reader int) bool {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ~ $1
  AND ($2::int = 0 OR $2::int = ANY(pg_blocking_pids(pid)))`, pattern, reader).Scan(&n))
	return n > 0
}

// mustNotWait runs fn and fails the test if, while it runs, a statement matching pattern waits
// for a lock: fn must go through whatever else holds locks meanwhile.
func mustNotWait(t *testing.T, s *store.Store, pattern string, fn func() error) {
	t.Helper()
	mustNotWaitFor(t, s.Pool(), pattern, 0, fn)
}

// mustNotWaitFor is mustNotWait for waits on the locks of backend reader (0: any), watched
// through db: a pool of the test's own, when fn may take every connection of the store's (a
// creator waiting for the reader holds one).
func mustNotWaitFor(t *testing.T, db *pgxpool.Pool, pattern string, reader int, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	for {
		select {
		case err := <-done:
			require.NoError(t, err)
			return
		case <-time.After(5 * time.Millisecond):
		}
		if readerWaiter(t, db, pattern, reader) {
			t.Fatalf("a statement matching %q waits for a lock", pattern)
		}
	}
}

// holdReader opens a transaction that has read every partition of event_payloads, as a long
// report would, and returns the function that ends it.
func holdReader(t *testing.T, s *store.Store) func() {
	t.Helper()
	end, _ := holdReaderPID(t, s)
	return end
}

// holdReaderPID is holdReader that also returns the reader's backend pid.
func holdReaderPID(t *testing.T, s *store.Store) (end func(), pid int) {
	t.Helper()
	tx, err := s.Pool().Begin(t.Context())
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(t.Context(), `SELECT count(*), pg_backend_pid() FROM event_payloads`).Scan(&n, &pid))
	var once sync.Once
	end = func() { once.Do(func() { _ = tx.Rollback(context.Background()) }) }
	t.Cleanup(end)
	return end, pid
}

// Creating a partition takes no lock that waits for a reader of the table (CREATE TABLE ...
// PARTITION OF would take ACCESS EXCLUSIVE and hold every insert behind it), and concurrent
// creators create each partition once.
func TestEnsurePartitionsWaitsForNoReader(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	s := storetest.OpenURL(t, dbURL, store.Options{})
	ctx := t.Context()
	now := time.Now()
	_, err := s.Retention.EnsurePartitions(ctx, store.DefaultPartitioning, now, now)
	require.NoError(t, err)
	_, reader := holdReaderPID(t, s)
	watch := storetest.NewPool(t, dbURL)

	var (
		mu      sync.Mutex
		created []string
	)
	mustNotWaitFor(t, watch, ddl, reader, func() error {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				var ps []domain.Partition
				ps, errs[i] = s.Retention.EnsurePartitions(ctx, domain.Partitioning{Ahead: 6}, now, now)
				mu.Lock()
				defer mu.Unlock()
				for _, p := range ps {
					created = append(created, p.Name)
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
	assert.Len(t, created, 2*3, "three more months of each table, each created once")
	parts, err := s.Retention.Partitions(ctx, store.PayloadsTable)
	require.NoError(t, err)
	assert.Len(t, parts, 1+6)
	_, err = s.Events.RecordEvent(ctx, statusEvent("ens_new", "m1", domain.StatusDelivered, "", now))
	require.NoError(t, err)
}

// A missing partition is told from a data error by the error's fields, not its text, which
// lc_messages translates: PostgreSQL's own error for a row with no partition is recognized, so is
// the same error in German, and a named CHECK constraint's violation (a data error) is not.
func TestNoPartitionIsToldByItsFieldsNotItsText(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	_, err := s.Pool().Exec(t.Context(), `INSERT INTO event_payloads (provider, event_id, received_at, payload) VALUES ('p', 'e', '2100-01-01', '{}')`)
	require.Error(t, err)
	assert.True(t, store.IsNoPartition(err), "PostgreSQL's error for a row no partition takes: %v", err)

	german := &pgconn.PgError{Code: "23514", TableName: "event_payloads",
		Message: `keine Partition von Relation »event_payloads« für Zeile gefunden`}
	assert.True(t, store.IsNoPartition(fmt.Errorf("enqueue: %w", german)), "the same error under lc_messages = de_DE")

	_, err = s.Pool().Exec(t.Context(), `ALTER TABLE messages ADD CONSTRAINT no_x CHECK (message_id <> 'x')`)
	require.NoError(t, err)
	_, err = s.Pool().Exec(t.Context(), `INSERT INTO messages (provider, message_id, status) VALUES ('p', 'x', 'accepted')`)
	require.Error(t, err)
	assert.False(t, store.IsNoPartition(err), "a CHECK constraint's violation is the data's fault: %v", err)
}
