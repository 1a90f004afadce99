package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Writable checks, on a connection of its own, that PostgreSQL takes new connections and
// writes: what a worker's database steps need (pggate probes with it). Its own connection, not
// the pool's, so that a pool busy with healthy work never reads as an outage and a pool holding
// connections from before a restart does not hide one. A server that answers read-only (a
// standby not yet promoted, default_transaction_read_only) fails with SQLSTATE 25006, as a
// write would, so IsUnavailable classifies it alike.
func (s *Store) Writable(ctx context.Context) error {
	cfg := s.db.pool.Config().ConnConfig.Copy()
	// One statement on a connection of its own: nothing to prepare, and safe through a
	// transaction-mode pooler.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cfg.Tracer = nil
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("probe PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	var readOnly string
	if err := conn.QueryRow(ctx, `SELECT current_setting('transaction_read_only')`).Scan(&readOnly); err != nil {
		return fmt.Errorf("probe PostgreSQL: %w", err)
	}
	if readOnly != "off" {
		return fmt.Errorf("probe PostgreSQL: %w", &pgconn.PgError{Severity: "ERROR", Code: "25006",
			Message: "PostgreSQL answers read-only (transaction_read_only is " + readOnly + ")"})
	}
	return nil
}
