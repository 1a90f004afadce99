package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sessions are the console's signed-out sessions (migration 00029): what makes a sign-out hold
// in every process, since the session itself is a signed cookie no process keeps.
type Sessions struct{ *db }

// The sign-out and the removal of those already expired in one statement: the table holds at
// most one session lifetime of sign-outs without a job of its own.
const qSignOut = `
WITH gone AS (DELETE FROM console_signouts WHERE expires_at < now())
INSERT INTO console_signouts (session_id, expires_at) VALUES ($1, $2)
ON CONFLICT (session_id) DO NOTHING`

const qSignedOut = `SELECT true FROM console_signouts WHERE session_id = $1`

// SignOut records that the session id was signed out; until is when its cookie expires anyway.
func (s *Sessions) SignOut(ctx context.Context, id string, until time.Time) error {
	if _, err := s.pool.Exec(ctx, qSignOut, id, until); err != nil {
		return fmt.Errorf("record console sign-out: %w", err)
	}
	return nil
}

// SignedOut reports whether the session id was signed out (by any process).
func (s *Sessions) SignedOut(ctx context.Context, id string) (bool, error) {
	var out bool
	err := s.pool.QueryRow(ctx, qSignedOut, id).Scan(&out)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read console sign-outs: %w", err)
	}
	return out, nil
}
