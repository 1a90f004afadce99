package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// A park into a draining sink wakes nobody, and the sink's drain closes it when it finds nothing
// parked. When the two race (the park in flight while the drain's Settle looks at the backlog),
// the close must not leave the notification parked behind a closed sink with its drainer idle
// for minutes (workflows.IdleCheck): a fault run on the real Temporal server saw one stay
// parked after every drainer had drained. Whichever commits first, the park ends woken and the
// sink draining, and the one wake is the racing park's.
func TestParkRacingTheDrainsCloseWakesTheDrainer(t *testing.T) {
	t.Parallel()

	// drained: sink app draining with nothing parked, as after its drain's last batch, and a
	// pending notification of it.
	drained := func(t *testing.T) (*store.Store, delivery.Notification) {
		s := storetest.Open(t)
		ctx := t.Context()
		require.NoError(t, s.Sinks.EnsureSinks(ctx, []store.SinkLimit{{Name: "app"}}))
		first := pending(t, s, "app", "evt_first", "msg_1", 1)
		p, err := s.Sinks.ParkNotification(ctx, first.ID, "app", delivery.ReasonRetriesSpent, time.Time{})
		require.NoError(t, err)
		require.True(t, p.Woke)
		require.NoError(t, s.Notifications.MarkNotificationSent(ctx, first.ID))
		sk := sinkOf(t, s, "app")
		require.Equal(t, delivery.Draining, sk.State)
		require.Zero(t, sk.Parked)
		return s, pending(t, s, "app", "evt_racing", "msg_2", 1)
	}
	type parked struct {
		p   delivery.Parked
		err error
	}
	park := func(s *store.Store, n delivery.Notification) chan parked {
		out := make(chan parked, 1)
		go func() {
			p, err := s.Sinks.ParkNotification(context.Background(), n.ID, "app", delivery.ReasonBehind, time.Time{})
			out <- parked{p, err}
		}()
		return out
	}
	// waitingFor waits until a statement containing what waits for a lock, or done is ready.
	waitingFor := func(t *testing.T, s *store.Store, what string, done chan parked) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if len(done) > 0 {
				return
			}
			var n int
			require.NoError(t, s.Pool().QueryRow(t.Context(),
				`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND strpos(query, $1) > 0`,
				what).Scan(&n))
			if n > 0 {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("nothing waits for a lock in %q", what)
	}
	settled := func(t *testing.T, s *store.Store, res parked, drainSaw delivery.State) {
		t.Helper()
		require.NoError(t, res.err)
		assert.Equal(t, delivery.Closed, drainSaw, "the drain's Settle saw nothing parked: the race")
		assert.True(t, res.p.Parked)
		assert.True(t, res.p.Woke, "the park that raced the close wakes the drainer")
		sk := sinkOf(t, s, "app")
		assert.Equal(t, delivery.Draining, sk.State, "a parked notification behind a closed sink is sent by nobody")
		assert.EqualValues(t, 1, sk.Parked)
	}

	t.Run("the park commits after the close", func(t *testing.T) {
		t.Parallel()
		s, n := drained(t)
		ctx := t.Context()
		// The park's statement takes its snapshot (the sink draining), then waits for the
		// notification's row, held here, while the drain closes the sink.
		tx, err := s.Pool().Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(context.Background()) }()
		_, err = tx.Exec(ctx, `SELECT 1 FROM notifications WHERE id = $1 FOR UPDATE`, n.ID)
		require.NoError(t, err)
		done := park(s, n)
		waitingFor(t, s, "SET status = 'parked'", done)
		drainSaw, err := s.Sinks.Settle(ctx, "app")
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
		settled(t, s, <-done, drainSaw)
	})

	t.Run("the close commits after the park", func(t *testing.T) {
		t.Parallel()
		s, n := drained(t)
		ctx := t.Context()
		// The drain's Settle stops after its look at the backlog (nothing parked) and before its
		// commit: a trigger on the close waits for an advisory lock held here.
		_, err := s.Pool().Exec(ctx, `
CREATE FUNCTION hold_close() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_advisory_xact_lock_shared(4242); RETURN NEW; END $$;
CREATE TRIGGER hold_close BEFORE UPDATE ON sinks FOR EACH ROW
WHEN (OLD.state = 'draining' AND NEW.state = 'closed') EXECUTE FUNCTION hold_close();`)
		require.NoError(t, err)
		holder, err := s.Pool().Acquire(ctx)
		require.NoError(t, err)
		defer holder.Release()
		_, err = holder.Exec(ctx, `SELECT pg_advisory_lock(4242)`)
		require.NoError(t, err)
		type closed struct {
			state delivery.State
			err   error
		}
		closing := make(chan closed, 1)
		go func() {
			st, err := s.Sinks.Settle(context.Background(), "app")
			closing <- closed{st, err}
		}()
		waitingFor(t, s, "UPDATE sinks s", nil)
		// The park commits (it saw the sink draining) while the close is in flight.
		done := park(s, n)
		waitingFor(t, s, "FOR KEY SHARE", done)
		_, err = holder.Exec(ctx, `SELECT pg_advisory_unlock(4242)`)
		require.NoError(t, err)
		c := <-closing
		require.NoError(t, c.err)
		settled(t, s, <-done, c.state)
	})
}
