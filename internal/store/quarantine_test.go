package store_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// Quarantined events page through ListQuarantine in the order they were quarantined, filtered by
// provider; a repeated quarantine keeps the first time and says what failed last.
func TestQuarantineListsPagesAndCounts(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	for _, id := range []string{"evt_1", "evt_2", "evt_3", "evt_ok"} {
		_, err := storetest.Enqueue(ctx, s, statusEvent(id, "msg_"+id, domain.StatusAccepted, "", at(0)))
		require.NoError(t, err)
	}
	for _, id := range []string{"evt_2", "evt_1", "evt_3"} {
		require.NoError(t, s.Events.Quarantine(ctx, provider, id, "ApplyStatus", "first failure of "+id))
	}
	require.NoError(t, s.Events.Quarantine(ctx, provider, "evt_2", "MarkProcessed", "second failure"))
	require.ErrorIs(t, s.Events.Quarantine(ctx, provider, "evt_missing", "ApplyStatus", "x"), domain.ErrNotFound)

	n, err := s.Quarantined.QuarantineCount(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)
	assert.Equal(t, 3, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE quarantined_at IS NOT NULL AND NOT awaiting_start`),
		"a quarantined event leaves the inbox")

	var ids []string
	after := ""
	for page := 0; ; page++ {
		require.Less(t, page, 5)
		list, next, err := s.Quarantined.ListQuarantine(ctx, store.QuarantineFilter{After: after, Limit: 2})
		require.NoError(t, err)
		for _, q := range list {
			ids = append(ids, q.EventID)
			if q.EventID == "evt_2" {
				assert.Equal(t, "MarkProcessed", q.Stage)
				assert.Equal(t, "second failure", q.Error)
				assert.Equal(t, "msg_evt_2", q.MessageID)
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	assert.Equal(t, []string{"evt_2", "evt_1", "evt_3"}, ids, "first quarantined first, each once")

	list, _, err := s.Quarantined.ListQuarantine(ctx, store.QuarantineFilter{Provider: "other", Limit: 10})
	require.NoError(t, err)
	assert.Empty(t, list)
	_, _, err = s.Quarantined.ListQuarantine(ctx, store.QuarantineFilter{After: "not-a-cursor", Limit: 10})
	require.ErrorIs(t, err, store.ErrBadCursor)
}
