package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// A signed-out session is seen as such by any reader of the database until it would have
// expired; a second sign-out of it is no error, and each sign-out removes the expired ones, so
// the table holds at most one session lifetime of them.
func TestSignedOutSessionsAreKeptUntilTheyExpire(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	out, err := s.Sessions.SignedOut(ctx, "s_live")
	require.NoError(t, err)
	assert.False(t, out, "never signed out")

	require.NoError(t, s.Sessions.SignOut(ctx, "s_live", time.Now().Add(time.Hour)))
	require.NoError(t, s.Sessions.SignOut(ctx, "s_live", time.Now().Add(time.Hour)), "a second sign-out")
	require.NoError(t, s.Sessions.SignOut(ctx, "s_old", time.Now().Add(-time.Minute)))
	out, err = s.Sessions.SignedOut(ctx, "s_live")
	require.NoError(t, err)
	assert.True(t, out)

	// The next sign-out removes s_old, past its expiry.
	require.NoError(t, s.Sessions.SignOut(ctx, "s_next", time.Now().Add(time.Hour)))
	out, err = s.Sessions.SignedOut(ctx, "s_old")
	require.NoError(t, err)
	assert.False(t, out, "an expired sign-out is removed (its cookie has expired too)")
	for _, id := range []string{"s_live", "s_next"} {
		out, err = s.Sessions.SignedOut(ctx, id)
		require.NoError(t, err)
		assert.True(t, out, id)
	}
}

// The console's recipient list reads each message's status in one statement; a key with no
// message is left out.
func TestMessageStatusesReadsEachKey(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	softBounces(t, s, apply.Rules{}, "ms", "someone@example.com", at(0), time.Hour, 2)
	keys := []store.MessageKey{{Provider: provider, MessageID: "msg_ms_0"}, {Provider: provider, MessageID: "msg_ms_1"},
		{Provider: provider, MessageID: "msg_none"}}
	st, err := s.Messages.MessageStatuses(t.Context(), keys)
	require.NoError(t, err)
	assert.Equal(t, map[store.MessageKey]store.MessageStatus{
		keys[0]: {Status: string(domain.StatusBounced), BounceType: domain.BounceSoft},
		keys[1]: {Status: string(domain.StatusBounced), BounceType: domain.BounceSoft},
	}, st)
	st, err = s.Messages.MessageStatuses(t.Context(), nil)
	require.NoError(t, err)
	assert.Empty(t, st)
}
