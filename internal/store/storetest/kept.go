package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/store"
)

// KeptDatabase returns the URL of the migrated database name, creating it when it does not
// exist, and reports whether it did. Unlike NewDatabase it is not dropped: benchmarks that
// load millions of rows keep them between runs. Drop it with DROP DATABASE when done.
func KeptDatabase(tb testing.TB, name string) (string, bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := AdminURL()
	conn, err := connect(ctx, admin)
	if err != nil {
		tb.Fatalf("PostgreSQL is required and is not reachable at %s: %v", redact(admin), err)
	}
	defer conn.Close(ctx)
	dbURL, err := withDatabase(admin, name)
	if err != nil {
		tb.Fatal(err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		tb.Fatal(err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			tb.Fatalf("create database %s: %v", name, err)
		}
	}
	if err := store.Migrate(ctx, dbURL); err != nil {
		tb.Fatalf("migrate %s: %v", name, err)
	}
	return dbURL, !exists
}
