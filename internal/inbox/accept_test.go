package inbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/event"
	"github.com/mailhook/mailhook/internal/inbox"
	"github.com/mailhook/mailhook/internal/ingest"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

func ev(id string) event.Event {
	return event.Event{Provider: "postscale", EventID: id, Type: "email.delivered", Kind: event.KindStatus,
		Status: event.StatusDelivered, MessageID: "msg_" + id}
}

// Concurrent requests share INSERTs, and each still gets its own answer: every event accepted
// exactly once across all of them, a shared event exactly once, and one row per event.
func TestConcurrentAcceptsShareInsertsAndAnswerEachRequest(t *testing.T) {
	s := storetest.Open(t)
	a := inbox.NewAcceptor(s, nil)
	a.Writers = 2
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(50 * time.Millisecond)

	const n = 200
	answers := make([][]ingest.Status, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st, err := a.Accept(t.Context(), []event.Event{ev(fmt.Sprintf("evt_%03d", i)), ev("evt_shared"), ev(fmt.Sprintf("evt_%03d", i))})
			require.NoError(t, err)
			answers[i] = st
		})
	}
	wg.Wait()
	shared := 0
	for i, st := range answers {
		require.Len(t, st, 3)
		assert.Equal(t, ingest.Accepted, st[0], "request %d: its own event", i)
		assert.Equal(t, ingest.Duplicate, st[2], "request %d: its own event repeated", i)
		if st[1] == ingest.Accepted {
			shared++
		}
	}
	assert.Equal(t, 1, shared, "the shared event is accepted by exactly one request")
	stats := a.Stats()
	assert.EqualValues(t, n, stats.Requests)
	assert.Less(t, stats.Inserts, stats.Requests, "concurrent requests never shared an INSERT")
	t.Logf("%d requests in %d inserts", stats.Requests, stats.Inserts)
	var rows int
	require.NoError(t, s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM webhook_events WHERE awaiting_start`).Scan(&rows))
	assert.Equal(t, n+1, rows)
}

// An event the inbox cannot store fails its own request with ErrNotStorable (a 400), before it
// can share a statement with anyone else's events.
func TestNotStorableFailsOnlyItsRequest(t *testing.T) {
	s := storetest.Open(t)
	a := inbox.NewAcceptor(s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	bad := ev("evt_bad")
	bad.Recipient = "a\u0000b@example.com"
	_, err := a.Accept(t.Context(), []event.Event{ev("evt_ok_too"), bad})
	require.ErrorIs(t, err, store.ErrNotStorable)
	st, err := a.Accept(t.Context(), []event.Event{ev("evt_ok")})
	require.NoError(t, err)
	assert.Equal(t, []ingest.Status{ingest.Accepted}, st)
	var rows int
	require.NoError(t, s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM webhook_events`).Scan(&rows))
	assert.Equal(t, 1, rows, "nothing of the refused request is stored")
}

// Without Run (or after it stopped) each request inserts on its own.
func TestAcceptWithoutRunInsertsDirectly(t *testing.T) {
	s := storetest.Open(t)
	a := inbox.NewAcceptor(s, nil)
	st, err := a.Accept(t.Context(), []event.Event{ev("evt_1"), ev("evt_1")})
	require.NoError(t, err)
	assert.Equal(t, []ingest.Status{ingest.Accepted, ingest.Duplicate}, st)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	st, err = a.Accept(t.Context(), []event.Event{ev("evt_2")})
	require.NoError(t, err)
	assert.Equal(t, []ingest.Status{ingest.Accepted}, st)
}
