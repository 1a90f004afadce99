// Package storetest gives tests a fresh, migrated PostgreSQL database of their own, so
// integration tests can run in parallel and leave nothing behind.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
)

// EnvDatabaseURL names the variable holding the URL of a database the tests may create and
// drop databases from.
const EnvDatabaseURL = "MAILHOOK_TEST_DATABASE_URL"

// DefaultAdminURL is the local development server used when EnvDatabaseURL is unset.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// AdminURL returns the URL of the database used to create and drop test databases.
func AdminURL() string {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return u
	}
	return DefaultAdminURL
}

// PoolMaxConns is the pool_max_conns the URLs of test databases carry: the most connections
// each pool opened on one keeps (store.Open's, without it 16; a test's own pool, NewPool's,
// keeps TestPoolMaxConns whatever the URL says).
// The packages' tests run at once against one PostgreSQL, whose max_connections (100 by
// default) is shared with whatever else uses it, a second `make test` among them: each run may
// hold half (docs/TESTING.md, "PostgreSQL connections", where this number is budgeted). Five
// covers what one test runs at once (TestBatchAndThreeRelaysStartEachEventOnce: three relays,
// each holding a connection through its batch, beside the HTTP API and the worker's steps; the
// test's own queries go through NewPool); the store never holds one connection while it waits
// for another, so a busier test waits for a connection rather than deadlocks. An admin URL
// that sets pool_max_conns itself keeps its value.
const PoolMaxConns = 5

// NewDatabase creates a uniquely named, migrated database that is dropped when the test ends,
// and returns its URL (with pool_max_conns: PoolMaxConns). Without a reachable PostgreSQL it
// skips under -short and fails otherwise: a missing database must not pass as green
// integration tests.
func NewDatabase(t testing.TB) string {
	t.Helper()
	dbURL := NewEmptyDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := store.Migrate(ctx, dbURL); err != nil {
		t.Fatalf("migrate test database: %v", err)
	}
	return dbURL
}

// NewEmptyDatabase is NewDatabase without the migrations, for tests of Migrate itself.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	return newEmptyDatabase(t, "")
}

// OpenCLocale is OpenWith on a database whose collation and character type are C, as some
// managed PostgreSQL services create them: lower() and ILIKE there fold ASCII letters only.
func OpenCLocale(t testing.TB, o store.Options) *store.Store {
	t.Helper()
	dbURL := newEmptyDatabase(t, "TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := store.Migrate(ctx, dbURL); err != nil {
		t.Fatalf("migrate test database: %v", err)
	}
	return OpenURL(t, dbURL, o)
}

// newEmptyDatabase creates the database with options after CREATE DATABASE name.
func newEmptyDatabase(t testing.TB, options string) string {
	t.Helper()
	admin := AdminURL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	conn, err := connect(ctx, admin)
	if err != nil {
		if testing.Short() {
			t.Skipf("PostgreSQL is not reachable at %s: %v (skipped under -short)", redact(admin), err)
		}
		t.Fatalf("PostgreSQL is required for this test and is not reachable at %s: %v "+
			"(start it, or run go test -short to skip integration tests)", redact(admin), err)
	}
	defer conn.Close(ctx)

	name := "mailhook_test_" + randomHex(8)
	dbURL, err := withDatabase(admin, name)
	if err == nil && !strings.Contains(admin, "pool_max_conns") {
		dbURL, err = WithParam(dbURL, "pool_max_conns", strconv.Itoa(PoolMaxConns))
	}
	if err != nil {
		t.Fatalf("test database url: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" "+options); err != nil {
		t.Fatalf("create test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// The test's own context is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := connect(ctx, admin)
		if err != nil {
			t.Errorf("drop test database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		// FORCE ends connections a test leaked, which would otherwise block the drop.
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return dbURL
}

// Open returns a Store on a fresh migrated database, closed when the test ends.
func Open(t testing.TB) *store.Store {
	t.Helper()
	return OpenWith(t, store.Options{})
}

// OpenWith is Open with the store configured by o.
func OpenWith(t testing.TB, o store.Options) *store.Store {
	t.Helper()
	return OpenURL(t, NewDatabase(t), o)
}

// OpenURL opens a Store configured by o on dbURL (NewDatabase's), closed when the test ends.
func OpenURL(t testing.TB, dbURL string, o store.Options) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.Open(ctx, dbURL, o)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	// Registered after the database's cleanup, so it runs before the drop.
	t.Cleanup(s.Close)
	remember(t, s, dbURL, o)
	return s
}

func connect(ctx context.Context, dbURL string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	// An unreachable server should fail the test quickly, not after the OS connect timeout.
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > 5*time.Second {
		cfg.ConnectTimeout = 5 * time.Second
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// withDatabase returns dbURL pointing at database name instead, for both URL and
// keyword/value connection strings.
func withDatabase(dbURL, name string) (string, error) {
	if strings.HasPrefix(dbURL, "postgres://") || strings.HasPrefix(dbURL, "postgresql://") {
		u, err := url.Parse(dbURL)
		if err != nil {
			return "", err
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// A later dbname keyword overrides an earlier one.
	return dbURL + " dbname=" + name, nil
}

// WithParam returns dbURL with the connection parameter key set to value, for both URL and
// keyword/value connection strings.
func WithParam(dbURL, key, value string) (string, error) {
	if strings.HasPrefix(dbURL, "postgres://") || strings.HasPrefix(dbURL, "postgresql://") {
		u, err := url.Parse(dbURL)
		if err != nil {
			return "", err
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	// A later keyword overrides an earlier one.
	return dbURL + " " + key + "=" + value, nil
}

// redact hides a password in dbURL so it does not end up in test logs.
func redact(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil || u.User == nil {
		return dbURL
	}
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// Enqueue inserts events into the inbox the way the acceptance path does, due for relays at
// once (no hold), and reports per event whether it was inserted (false: a duplicate).
func Enqueue(ctx context.Context, s *store.Store, evs ...domain.Event) ([]bool, error) {
	rows := make([]store.InboxRow, len(evs))
	for i, ev := range evs {
		r, err := store.NewInboxRow(ev)
		if err != nil {
			return nil, err
		}
		rows[i] = r
	}
	return s.Inbox.EnqueueRows(ctx, rows, 0)
}

// Backdate moves the recorded events ids (of any provider) to received_at = at, in the key
// table and in the payload partitions alike (creating the partition at needs through s), the
// way they would be had they arrived then. The moves are one transaction on db, a pool on the
// database of s (NewPool's, Pool's).
func Backdate(ctx context.Context, s *store.Store, db Beginner, at time.Time, ids ...string) error {
	if _, err := s.Retention.EnsurePartitions(ctx, store.DefaultPartitioning, at, time.Now()); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		// The payload first: it is found by the key row's received_at.
		if _, err := tx.Exec(ctx, `
UPDATE event_payloads p SET received_at = $1
FROM webhook_events w
WHERE w.event_id = ANY($2) AND p.provider = w.provider AND p.event_id = w.event_id AND p.received_at = w.received_at`,
			at, ids); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE webhook_events SET received_at = $1 WHERE event_id = ANY($2)`, at, ids)
		return err
	})
}
