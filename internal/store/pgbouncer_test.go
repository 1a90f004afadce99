package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/suppression"
)

// The store's main paths work through PgBouncer in transaction pooling mode, concurrently, with
// migrations run on the session-mode connection (database.listen_url: here PostgreSQL itself).
// PgBouncer keeps fewer server connections than the store's pool has clients, so one client
// connection's transactions run on different server connections. Without
// TransactionPooler the same test fails on 1.18 (Debian 12) with "prepared statement
// \"stmtcache_…\" does not exist" (or "already exists"): pgx's statement cache is per client
// connection, the prepared statements are per server connection.
func TestStoreThroughPgBouncerTransactionPooling(t *testing.T) {
	t.Parallel()
	direct := storetest.NewEmptyDatabase(t)
	pooled := storetest.PgBouncer(t, direct) // stopped before the database is dropped
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	require.NoError(t, store.Migrate(ctx, direct), "migrate through listen_url")
	// The soft-bounce escalation takes pg_advisory_xact_lock inside Process's transaction.
	s, err := store.Open(ctx, pooled, store.Options{TransactionPooler: true})
	rules := apply.Rules{Escalation: suppression.SoftBounce{Count: 3, Within: time.Hour}}
	require.NoError(t, err)
	t.Cleanup(s.Close)

	// Every event is a soft bounce of its own message to one of two addresses: each address
	// reaches the threshold, so exactly one event per address suppresses it.
	const writers, perWriter = 8, 12
	addresses := []string{"a@example.com", "b@example.com"}
	batches := make([][]domain.Event, writers)
	for w := range batches {
		for i := range perWriter {
			id := fmt.Sprintf("pgb_%d_%d", w, i)
			batches[w] = append(batches[w], bounceEvent(id, "msg_"+id, addresses[(w*perWriter+i)%2],
				domain.BounceSoft, at(w*perWriter+i), mailboxFull))
		}
	}
	const total = writers * perWriter

	// Accept and relay at once: each writer inserts its batch, then its neighbour's again (a
	// re-send, racing the neighbour's insert); relays claim with FOR UPDATE SKIP LOCKED meanwhile.
	var (
		writes  sync.WaitGroup
		relays  sync.WaitGroup
		claims  sync.Map // event id -> *atomic.Int32
		written atomic.Bool
		dupes   atomic.Int32
	)
	for w := range writers {
		writes.Go(func() {
			got, err := storetest.Enqueue(ctx, s, batches[w]...)
			if !assert.NoError(t, err, "enqueue") {
				return
			}
			again, err := storetest.Enqueue(ctx, s, batches[(w+1)%writers]...)
			if !assert.NoError(t, err, "enqueue a re-send") {
				return
			}
			for i := range got {
				if !got[i] {
					dupes.Add(1)
				}
				if !again[i] {
					dupes.Add(1)
				}
			}
		})
	}
	for range 3 {
		relays.Go(func() {
			for {
				done := written.Load() // read before the claim: a claim after it sees every row
				claimed, _, err := s.Inbox.RelayBatch(ctx, 7, store.Backoff{Initial: time.Second, Max: time.Second},
					func(_ context.Context, evs []store.RecordedEvent) []store.Settlement {
						for _, ev := range evs {
							n, _ := claims.LoadOrStore(ev.EventID, new(atomic.Int32))
							n.(*atomic.Int32).Add(1)
						}
						return allStarted(evs) // every workflow started
					})
				if !assert.NoError(t, err, "relay batch") || (done && claimed == 0) {
					return
				}
				if claimed == 0 {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	writes.Wait()
	written.Store(true)
	relays.Wait()
	require.False(t, t.Failed())
	assert.EqualValues(t, total, dupes.Load(), "each event inserted once; its re-send a duplicate")
	n, _, err := s.Inbox.Inbox(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "the relays started everything")
	claimed := 0
	claims.Range(func(id, n any) bool {
		claimed++
		assert.EqualValues(t, 1, n.(*atomic.Int32).Load(), "%s claimed once", id)
		return true
	})
	assert.Equal(t, total, claimed)

	// Process every event concurrently, as the workflows' activities do; one that suppressed
	// stays unprocessed until its notification is sent.
	ids := make(chan string, total)
	for _, b := range batches {
		for _, ev := range b {
			ids <- ev.EventID
		}
	}
	close(ids)
	var (
		procs      sync.WaitGroup
		suppressed atomic.Int32
	)
	for range 12 {
		procs.Go(func() {
			for id := range ids {
				res, err := s.Events.Process(ctx, provider, id, false, notifying{rules, func(_ domain.Event, r domain.ApplyResult, applied bool) bool {
					return applied && r.Suppressed
				}})
				if !assert.NoError(t, err, "process %s", id) {
					return
				}
				if res.Processed {
					continue
				}
				suppressed.Add(1)
				n, err := s.Notifications.EnsureNotification(ctx, delivery.Notification{Provider: provider, EventID: id, Sink: "app",
					Type: "suppression.added", Body: json.RawMessage(`{"event_id":"` + id + `"}`)})
				if assert.NoError(t, err, "ensure notification") &&
					assert.NoError(t, s.Notifications.RecordNotificationAttempt(ctx, n.ID, "timeout"), "attempt") &&
					assert.NoError(t, s.Notifications.MarkNotificationSent(ctx, n.ID), "sent") {
					assert.NoError(t, s.Events.MarkProcessed(ctx, provider, id), "mark processed")
				}
			}
		})
	}
	procs.Wait()
	require.False(t, t.Failed())

	assert.EqualValues(t, len(addresses), suppressed.Load(), "one suppressing event per address")
	assert.Equal(t, total, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE processed_at IS NOT NULL AND NOT awaiting_start`))
	assert.Equal(t, total, countRows(t, s, `SELECT count(*) FROM messages WHERE status = 'bounced'`))
	assert.Equal(t, len(addresses), countRows(t, s, `SELECT count(*) FROM suppressions`))
	assert.Equal(t, len(addresses), countRows(t, s, `SELECT count(*) FROM notifications WHERE status = 'sent' AND attempts = 2`))
	for _, a := range addresses {
		sup, err := s.GetSuppression(ctx, a)
		require.NoError(t, err, a)
		assert.Equal(t, domain.ReasonSoftBounceThreshold, sup.Reason, a)
	}
	m, err := s.Messages.GetMessage(ctx, provider, "msg_pgb_0_0") // a read-only repeatable-read transaction
	require.NoError(t, err)
	assert.Equal(t, domain.StatusBounced, m.Status)
	assert.Len(t, m.Events, 1)
}
