package store

import (
	"context"
	"fmt"
	"time"
)

// The token's first event id wins, under concurrency too: DO UPDATE locks the row, so a second
// request waits for the first to commit and then reads its binding. A row whose signature has
// expired is rebound (it could not verify anyway; this only keeps a clock step from wedging it).
const qBindNonce = `
INSERT INTO signature_nonces AS n (provider, nonce, event_id, expires_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (provider, nonce) DO UPDATE SET
    event_id   = CASE WHEN n.expires_at < now() THEN EXCLUDED.event_id ELSE n.event_id END,
    expires_at = CASE WHEN n.expires_at < now() THEN EXCLUDED.expires_at ELSE n.expires_at END
RETURNING event_id`

const qPurgeNonces = `DELETE FROM signature_nonces WHERE expires_at < $1`

// BindNonce binds a signed single-use value (Mailgun's token) to the event it first arrived
// with and returns the event id it is bound to: eventID for the first request and for retries
// of the same event, another id when the signature was captured and reused.
func (s *Nonces) BindNonce(ctx context.Context, provider, nonce, eventID string, expires time.Time) (string, error) {
	var bound string
	if err := s.pool.QueryRow(ctx, qBindNonce, provider, nonce, eventID, expires).Scan(&bound); err != nil {
		return "", fmt.Errorf("bind %s signature token to event %s: %w", provider, eventID, err)
	}
	return bound, nil
}

// PurgeNonces deletes the bindings whose signatures expired before before, and says how many.
func (s *Nonces) PurgeNonces(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, qPurgeNonces, before)
	if err != nil {
		return 0, fmt.Errorf("purge signature tokens: %w", err)
	}
	return tag.RowsAffected(), nil
}
