package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A token is bound to the first event id it arrives with: retries of that event pass, another
// event under the same token sees the first binding, and concurrent first uses agree on one.
func TestBindNonceFirstEventWins(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	exp := time.Now().Add(time.Hour)

	got, err := s.Nonces.BindNonce(ctx, "mailgun", "tok_1", "evt_a", exp)
	require.NoError(t, err)
	assert.Equal(t, "evt_a", got)
	got, err = s.Nonces.BindNonce(ctx, "mailgun", "tok_1", "evt_a", exp)
	require.NoError(t, err)
	assert.Equal(t, "evt_a", got, "a retry of the same event")
	got, err = s.Nonces.BindNonce(ctx, "mailgun", "tok_1", "evt_forged", exp)
	require.NoError(t, err)
	assert.Equal(t, "evt_a", got, "a captured token under another event")
	got, err = s.Nonces.BindNonce(ctx, "other", "tok_1", "evt_b", exp)
	require.NoError(t, err)
	assert.Equal(t, "evt_b", got, "tokens are per provider")

	var wg sync.WaitGroup
	results := make([]string, 8)
	for i := range results {
		wg.Go(func() {
			r, err := s.Nonces.BindNonce(ctx, "mailgun", "tok_race", []string{"evt_x", "evt_y"}[i%2], exp)
			assert.NoError(t, err)
			results[i] = r
		})
	}
	wg.Wait()
	for _, r := range results {
		assert.Equal(t, results[0], r, "every concurrent use sees one binding")
	}

	// An expired binding is purged, and a binding that expired (a clock step) is rebound.
	_, err = s.Nonces.BindNonce(ctx, "mailgun", "tok_old", "evt_old", time.Now().Add(-time.Minute))
	require.NoError(t, err)
	got, err = s.Nonces.BindNonce(ctx, "mailgun", "tok_old", "evt_new", exp)
	require.NoError(t, err)
	assert.Equal(t, "evt_new", got)
	_, err = s.Nonces.BindNonce(ctx, "mailgun", "tok_gone", "evt_gone", time.Now().Add(-time.Minute))
	require.NoError(t, err)
	n, err := s.Nonces.PurgeNonces(ctx, time.Now())
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	assert.Equal(t, 4, countRows(t, s, `SELECT count(*) FROM signature_nonces`))
}
