package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailhook/mailhook/internal/store"
)

// TestPoolMaxConns is the most connections a test's own pool (NewPool, Pool) keeps, whatever
// pool_max_conns its URL carries: it runs the test's queries beside the store's pool, on the
// same PostgreSQL whose max_connections every package's tests share (see PoolMaxConns).
const TestPoolMaxConns = 2

// Beginner is what Backdate runs its transaction on: a *pgxpool.Pool, a *pgx.Conn.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// NewPool opens a pool of the test's own on dbURL (NewDatabase's), for the queries a test runs
// around a store: it is not the store's pool, so it shares no connection, session or
// transaction with it. It keeps at most TestPoolMaxConns connections, opened as needed, and is
// closed when the test ends.
func NewPool(t testing.TB, dbURL string) *pgxpool.Pool {
	t.Helper()
	p, err := newPool(dbURL, false)
	if err != nil {
		t.Fatalf("open test pool: %v", err)
	}
	// Registered after the database's cleanup, so it runs before the drop.
	t.Cleanup(p.Close)
	return p
}

func newPool(dbURL string, transactionPooler bool) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	// As store.Open does, so that a pool through PgBouncer's transaction mode works too.
	if transactionPooler && !strings.Contains(dbURL, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	cfg.MaxConns = TestPoolMaxConns
	cfg.MinConns = 0
	return pgxpool.NewWithConfig(context.Background(), cfg)
}

// opened is what storetest knows of a store it opened: the database URL, and the test's pool
// on it once Pool asked for one.
type opened struct {
	dbURL             string
	transactionPooler bool

	once sync.Once
	pool *pgxpool.Pool
	err  error
}

var (
	openedMu sync.Mutex
	openedBy = map[*store.Store]*opened{}
)

// remember records s, opened by OpenURL on dbURL, until the test ends; then the pool Pool
// opened for it, if any, is closed.
func remember(t testing.TB, s *store.Store, dbURL string, o store.Options) {
	e := &opened{dbURL: dbURL, transactionPooler: o.TransactionPooler}
	openedMu.Lock()
	openedBy[s] = e
	openedMu.Unlock()
	t.Cleanup(func() {
		openedMu.Lock()
		delete(openedBy, s)
		openedMu.Unlock()
		e.once.Do(func() {}) // no pool opened from now on
		if e.pool != nil {
			e.pool.Close()
		}
	})
}

// Pool returns the test's own pool (NewPool's) on the database of s, a store Open, OpenWith,
// OpenURL or OpenCLocale opened: one per store, opened on the first call and closed when the
// test that opened the store ends. It fails the test for any other store.
func Pool(t testing.TB, s *store.Store) *pgxpool.Pool {
	t.Helper()
	openedMu.Lock()
	e := openedBy[s]
	openedMu.Unlock()
	if e == nil {
		t.Fatalf("storetest.Pool: the store was not opened by storetest (or its test has ended): use NewPool on its URL")
	}
	e.once.Do(func() { e.pool, e.err = newPool(e.dbURL, e.transactionPooler) })
	if e.err != nil {
		t.Fatalf("open test pool: %v", e.err)
	}
	if e.pool == nil {
		t.Fatalf("storetest.Pool: the store's test has ended")
	}
	return e.pool
}
