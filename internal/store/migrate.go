package store

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// The SQL migrations; the few that need Go's rules are Go (migrate_*.go), registered below.
//
//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// Migrate applies every pending migration to the database at databaseURL. Several processes
// may call it at once (each replica migrates on start): a PostgreSQL session advisory lock
// makes them take turns, and the later ones find nothing left to do.
func Migrate(ctx context.Context, databaseURL string) error {
	return migrateTo(ctx, databaseURL, math.MaxInt64)
}

// migrateTo applies the pending migrations up to and including version, as Migrate does: a
// test can build a database as an older release left it (TestOnlineMigrationOfAPopulatedTable).
func migrateTo(ctx context.Context, databaseURL string, version int64) error {
	// Parsed as a pool's URL: its pool_* settings (pool_max_conns, which operators set in
	// database.url) are pgx's, not PostgreSQL's, and pgx.ParseConfig would send them to the
	// server as run-time parameters, which it refuses: "unrecognized configuration parameter".
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("migrate: parse database url: %w", err)
	}
	db := stdlib.OpenDB(*cfg.ConnConfig)
	defer db.Close()

	provider, err := newMigrations(db)
	if err != nil {
		return err
	}
	results, err := provider.UpTo(ctx, version)
	if partial, ok := errors.AsType[*goose.PartialError](err); ok {
		// Migrations before the failing one are committed: say so, the next run starts there.
		results = partial.Applied
	}
	// One line per migration at debug: a fresh database takes twenty, which would bury the rest
	// of make run's output; the summary below says how many.
	for _, r := range results {
		slog.DebugContext(ctx, "migration applied",
			"version", r.Source.Version, "file", cmp.Or(r.Source.Path, "(Go) "+goMigrationNames[r.Source.Version]), "duration", r.Duration)
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	current, err := provider.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate: read schema version: %w", err)
	}
	slog.InfoContext(ctx, "database schema up to date", "version", current, "applied", len(results))
	return nil
}

// goMigrations are the migrations that need Go's rules, beside the SQL files, and their names
// for the log.
var (
	goMigrations     = []*goose.Migration{addressKeysMigration, unicodeKeysMigration}
	goMigrationNames = map[int64]string{addressKeysVersion: "suppression keys as addresses",
		unicodeKeysVersion: "suppression keys in NFC with IDNA domains"}
)

// newMigrations is the goose provider of every migration on db, SQL and Go.
func newMigrations(db *sql.DB) (*goose.Provider, error) {
	migrations, err := fs.Sub(embeddedMigrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	// goose polls for the lock; the default 5s period would make a replica that lost the race
	// idle for seconds on every start, so poll each second for up to 5 minutes instead.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, fmt.Errorf("migrate: session locker: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations,
		goose.WithSessionLocker(locker),
		// Only this package's migrations: ignore Go migrations that any other package might
		// register globally.
		goose.WithDisableGlobalRegistry(true),
		goose.WithGoMigrations(goMigrations...),
		// Results are logged with slog; goose's own logger writes to stdout.
		goose.WithLogger(goose.NopLogger()),
	)
	if err != nil {
		return nil, fmt.Errorf("migrate: goose provider: %w", err)
	}
	return provider, nil
}
