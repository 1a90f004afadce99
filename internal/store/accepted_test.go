package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// What PostgreSQL answers while it cannot take a write is "unavailable" (the acceptance goes
// through Temporal); a refusal of the data, a missing table or a bug is not.
func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{
		"08006": true, "08001": true, "57P01": true, "57P03": true, "53300": true, "25006": true,
		"22P02": false, "23505": false, "42P01": false, "40001": false, "54000": false,
	} {
		assert.Equal(t, want, store.IsUnavailable(fmt.Errorf("enqueue: %w", &pgconn.PgError{Code: code})), "SQLSTATE %s", code)
	}
	assert.True(t, store.IsUnavailable(fmt.Errorf("wait for the insert: %w", context.DeadlineExceeded)))
	assert.False(t, store.IsUnavailable(nil))
	assert.False(t, store.IsUnavailable(errors.New("acceptor stopped")))
	assert.False(t, store.IsUnavailable(fmt.Errorf("enqueue: %w: %w", domain.ErrNotStorable, &pgconn.PgError{Code: "22P05"})))

	// A server that is not there, for real: connection refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = pgx.Connect(ctx, "postgres://postgres@"+addr+"/x?connect_timeout=5")
	require.Error(t, err)
	assert.True(t, store.IsUnavailable(fmt.Errorf("enqueue: %w", err)), "connection refused: %v", err)
}

// The first step of a run accepted through Temporal stores its event as the acceptance insert
// would have, marked started (its run is the one storing it), and is idempotent: a row there
// already is left as it is (and no longer waits for a relay), and an event recorded under its
// prior key is a duplicate.
func TestRecordAccepted(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	waiting := `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND awaiting_start`
	started := `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND NOT awaiting_start AND relayed_at IS NOT NULL`

	fresh := statusEvent("evt_new", "msg_1", domain.StatusDelivered, "", at(0))
	fresh.Raw = []byte(`{"id":"evt_new"}`)
	inserted, dup, err := s.Events.RecordAccepted(ctx, fresh)
	require.NoError(t, err)
	assert.True(t, inserted)
	assert.False(t, dup)
	assert.Equal(t, 1, countRows(t, s, started, "evt_new"))
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM event_payloads WHERE event_id = 'evt_new' AND payload->>'id' = 'evt_new' AND event IS NOT NULL`))
	// The provider's retry after the outage is a duplicate of the row the run stored.
	again, err := storetest.Enqueue(ctx, s, fresh)
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, again)
	inserted, dup, err = s.Events.RecordAccepted(ctx, fresh) // a retried attempt whose answer was lost
	require.NoError(t, err)
	assert.False(t, inserted || dup)

	// Accepted just before the outage and never started: the run takes it over.
	before := statusEvent("evt_before", "msg_2", domain.StatusDelivered, "", at(1))
	_, err = storetest.Enqueue(ctx, s, before)
	require.NoError(t, err)
	require.Equal(t, 1, countRows(t, s, waiting, "evt_before"))
	inserted, dup, err = s.Events.RecordAccepted(ctx, before)
	require.NoError(t, err)
	assert.False(t, inserted || dup)
	assert.Equal(t, 1, countRows(t, s, started, "evt_before"), "the row no longer waits for a relay")

	// Recorded under the id an earlier version gave it: a duplicate, nothing stored.
	old := statusEvent("evt_old", "msg_3", domain.StatusDelivered, "", at(2))
	_, err = storetest.Enqueue(ctx, s, old)
	require.NoError(t, err)
	renamed := old
	renamed.EventID, renamed.PriorEventID = "evt_old:2026-12-03", "evt_old"
	inserted, dup, err = s.Events.RecordAccepted(ctx, renamed)
	require.NoError(t, err)
	assert.False(t, inserted)
	assert.True(t, dup)
	assert.Equal(t, 0, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_old:2026-12-03'`))
	assert.Equal(t, 3, countRows(t, s, `SELECT count(*) FROM webhook_events`))
}
