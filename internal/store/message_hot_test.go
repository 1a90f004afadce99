package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// A new message is created with the recipient its first event names, so the outcome's update of
// the same row changes no indexed column and PostgreSQL can write it as a HOT update: no new
// entry in messages_pkey or messages_recipient_key_idx per new message (issue 46: what an
// event writes). What the message keeps is unchanged: the first recipient named, whichever
// event names it, and a message whose first event names none takes the next one's.
func TestANewMessageIsCreatedForItsRecipientAndItsUpdateIsHOT(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()

	// One new message: insert, then the outcome's update of the row this transaction created.
	_, err := s.Events.ApplyStatus(ctx, statusEvent("e_hot_delivered", "msg_hot", domain.StatusDelivered, "", at(3)), rules)
	require.NoError(t, err)

	// The update's counters reach pg_stat_user_tables once the backend that wrote it reports
	// them (within a second or so of going idle): wait for them, for as long as they move.
	var upd, hot int64
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.Pool().Exec(ctx, "SELECT pg_stat_force_next_flush()")
		require.NoError(t, err)
		require.NoError(t, s.Pool().QueryRow(ctx, `
SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'messages'`).Scan(&upd, &hot))
		if upd > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Equal(t, int64(1), upd, "the new message's outcome updates its row once")
	assert.Equal(t, int64(1), hot, "that update leaves every indexed column (the recipient's key included) as it is: HOT")

	m, err := s.Messages.GetMessage(ctx, provider, "msg_hot")
	require.NoError(t, err)
	assert.Equal(t, "to@example.com", m.Recipient)
	assert.Equal(t, domain.StatusDelivered, m.Status)

	// The first recipient named is kept: a later event naming another does not move it.
	other := statusEvent("e_hot_bounced", "msg_hot", domain.StatusBounced, domain.BounceSoft, at(4))
	other.Recipient = "other@example.com"
	res, err := s.Events.ApplyStatus(ctx, other, rules)
	require.NoError(t, err)
	assert.Equal(t, "to@example.com", res.Recipient)

	// A message whose first event names no recipient is created without one; the next event
	// to name one sets it, as before.
	opened := kindEvent("e_hot_opened", "msg_hot_later", domain.KindOpened, at(1))
	res, err = s.Events.ApplyStatus(ctx, opened, rules)
	require.NoError(t, err)
	assert.Empty(t, res.Recipient)
	named := statusEvent("e_hot_later_delivered", "msg_hot_later", domain.StatusDelivered, "", at(2))
	res, err = s.Events.ApplyStatus(ctx, named, rules)
	require.NoError(t, err)
	assert.Equal(t, "to@example.com", res.Recipient)
	m, err = s.Messages.GetMessage(ctx, provider, "msg_hot_later")
	require.NoError(t, err)
	assert.Equal(t, "to@example.com", m.Recipient)
	assert.Equal(t, int64(1), m.Opens)
}
