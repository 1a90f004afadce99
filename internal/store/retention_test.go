package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// month is the first instant of a UTC month.
func month(y int, m time.Month) time.Time { return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC) }

// notifyAt creates the notification of event id for sink as created at at, sent unless
// pending is set.
func notifyAt(t *testing.T, s *store.Store, eventID, sink string, at time.Time, pending bool) delivery.Notification {
	t.Helper()
	ctx := t.Context()
	n, err := s.Notifications.EnsureNotification(ctx, delivery.Notification{Provider: provider, EventID: eventID, Sink: sink,
		Type: domain.TypeStatusChanged, Body: json.RawMessage(`{"to":"to@example.com"}`)})
	require.NoError(t, err)
	if !pending {
		require.NoError(t, s.Notifications.MarkNotificationSent(ctx, n.ID))
	}
	_, err = s.Retention.EnsurePartitions(ctx, store.DefaultPartitioning, at, time.Now())
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE notification_bodies SET created_at = $2 WHERE id = $1`, n.ID, at); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE notifications SET created_at = $2 WHERE id = $1`, n.ID, at)
		return err
	}))
	return n
}

func partitionNamed(t *testing.T, s *store.Store, table, name string) (domain.Partition, bool) {
	t.Helper()
	parts, err := s.Retention.Partitions(t.Context(), table)
	require.NoError(t, err)
	for _, p := range parts {
		if p.Name == name {
			return p, true
		}
	}
	return domain.Partition{}, false
}

func names[T any](xs []T, name func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = name(x)
	}
	return out
}

func droppedNames(r domain.PartitionReport) []string {
	return names(r.Dropped, func(d domain.DroppedPartition) string { return d.Name })
}

// An expired partition goes whole unless it holds an unprocessed event's payload or a pending
// notification's body; those are kept and counted, and go once that is over. The key of an
// event whose payload went stays: a re-delivery is still a duplicate.
func TestDropExpiredPartitionsKeepsWhatIsStillNeeded(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	jan, feb, mar := month(2025, 1).Add(36*time.Hour), month(2025, 2).Add(36*time.Hour), month(2025, 3).Add(36*time.Hour)
	recordAt(t, s, statusEvent("ret_jan", "m1", domain.StatusDelivered, "", jan), jan, true)
	recordAt(t, s, statusEvent("ret_feb_waiting", "m2", domain.StatusDelivered, "", feb), feb, false)
	recordAt(t, s, statusEvent("ret_feb_quarantined", "m3", domain.StatusDelivered, "", feb), feb, false)
	require.NoError(t, s.Events.Quarantine(ctx, provider, "ret_feb_quarantined", "Process", "test"))
	recordAt(t, s, statusEvent("ret_feb_done", "m4", domain.StatusDelivered, "", feb), feb, true)
	recordAt(t, s, statusEvent("ret_mar", "m5", domain.StatusDelivered, "", mar), mar, true)
	sent := notifyAt(t, s, "ret_jan", "app", jan, false)
	notifyAt(t, s, "ret_feb_done", "app", feb, true) // still being delivered
	recent := statusEvent("ret_recent", "m6", domain.StatusDelivered, "", time.Now())
	_, err := s.Events.RecordEvent(ctx, recent)
	require.NoError(t, err)

	var progress int
	rep, err := s.Retention.DropExpiredPartitions(ctx, domain.DropOptions{Before: month(2025, 4), Progress: func(domain.PartitionReport) { progress++ }})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"event_payloads_p20250101_20250201", "event_payloads_p20250301_20250401",
		"notification_bodies_p20250101_20250201", "notification_bodies_p20250301_20250401",
	}, droppedNames(rep))
	assert.Equal(t, []domain.KeptPartition{
		{Name: "event_payloads_p20250201_20250301", From: month(2025, 2), To: month(2025, 3),
			Reason: domain.KeptUnprocessed, Unprocessed: 2, Quarantined: 1},
		{Name: "notification_bodies_p20250201_20250301", From: month(2025, 2), To: month(2025, 3),
			Reason: domain.KeptPendingNotifications, PendingNotifications: 1},
	}, rep.Kept)
	assert.Equal(t, 6, progress, "progress after every partition")
	for _, d := range rep.Dropped {
		assert.Positive(t, d.Bytes, d.Name)
		assert.False(t, d.Finalized || d.Leftover, d.Name)
	}
	_, ok := partitionNamed(t, s, store.PayloadsTable, "event_payloads_p20250401_20250501")
	assert.True(t, ok, "a partition that has not expired stays")
	assert.Zero(t, countRows(t, s, `SELECT count(*) FROM pg_class WHERE relname IN ('event_payloads_p20250101_20250201', 'notification_bodies_p20250101_20250201')`))

	// The key stays, the payload is gone: a re-delivery is a duplicate, a replay has nothing.
	res, err := s.Events.RecordEvent(ctx, statusEvent("ret_jan", "m1", domain.StatusDelivered, "", jan))
	require.NoError(t, err)
	assert.Equal(t, domain.RecordResult{AlreadyProcessed: true}, res)
	_, _, _, err = s.Events.StoredEvent(ctx, provider, "ret_jan")
	assert.ErrorIs(t, err, store.ErrPayloadExpired)
	ns, err := storetest.Notifications(ctx, s.Pool(), provider, "ret_jan")
	require.NoError(t, err)
	require.Len(t, ns, 1)
	assert.Equal(t, sent.ID, ns[0].ID)
	assert.Equal(t, domain.NotificationSent, ns[0].Status, "the notification's state stays with its key")
	assert.Empty(t, ns[0].Body)
	// Kept partitions keep their rows; the recent event is untouched.
	_, _, _, err = s.Events.StoredEvent(ctx, provider, "ret_feb_waiting")
	require.NoError(t, err)
	_, _, _, err = s.Events.StoredEvent(ctx, provider, "ret_recent")
	require.NoError(t, err)

	// A second run does nothing again.
	again, err := s.Retention.DropExpiredPartitions(ctx, domain.DropOptions{Before: month(2025, 4)})
	require.NoError(t, err)
	assert.Empty(t, again.Dropped)
	assert.Equal(t, rep.Kept, again.Kept)

	// Once the events are processed and the notification delivered, they go too.
	require.NoError(t, s.Events.MarkProcessed(ctx, provider, "ret_feb_waiting"))
	require.NoError(t, s.Events.MarkProcessed(ctx, provider, "ret_feb_quarantined"))
	require.NoError(t, s.Notifications.MarkNotificationSent(ctx, domain.NotificationID(provider, "ret_feb_done", "app", domain.TypeStatusChanged)))
	last, err := s.Retention.DropExpiredPartitions(ctx, domain.DropOptions{Before: month(2025, 4)})
	require.NoError(t, err)
	assert.Equal(t, []string{"event_payloads_p20250201_20250301", "notification_bodies_p20250201_20250301"}, droppedNames(last))
	assert.Empty(t, last.Kept)
}

// DETACH ... CONCURRENTLY waits for the transactions that use the table, but takes no lock an
// insert waits for: while the drop waits for a long reader, events and notifications are still
// recorded (into the table's current partitions) at once.
func TestDropExpiredPartitionsLetsInsertsThrough(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	jan := month(2025, 1).Add(time.Hour)
	recordAt(t, s, statusEvent("ins_old", "m1", domain.StatusDelivered, "", jan), jan, true)
	endReader := holdReader(t, s)

	type result struct {
		rep domain.PartitionReport
		err error
	}
	dropped := make(chan result, 1)
	go func() {
		rep, err := s.Retention.DropExpiredPartitions(ctx, domain.DropOptions{Before: month(2025, 2), LockTimeout: time.Hour})
		dropped <- result{rep, err}
	}()
	testenv.WaitUntil(t, "the detach waiting for the reader", testenv.Stall, func() bool {
		return lockWaiter(t, s, ddl)
	})

	for i, id := range []string{"ins_new_1", "ins_new_2"} {
		mustNotWait(t, s, inserts, func() error {
			_, err := s.Events.RecordEvent(ctx, statusEvent(id, "m2", domain.StatusDelivered, "", time.Now()))
			return err
		})
		mustNotWait(t, s, inserts, func() error {
			_, err := s.Notifications.EnsureNotification(ctx, delivery.Notification{Provider: provider, EventID: id, Sink: "app",
				Type: domain.TypeStatusChanged, Body: json.RawMessage(`{}`)})
			return err
		})
		assert.Equal(t, i+1, countRows(t, s, `SELECT count(*) FROM event_payloads WHERE event_id LIKE 'ins_new_%'`))
	}
	require.True(t, lockWaiter(t, s, ddl), "the detach still waits")

	endReader()
	r := <-dropped
	require.NoError(t, r.err)
	assert.Equal(t, []string{"event_payloads_p20250101_20250201", "notification_bodies_p20250101_20250201"}, droppedNames(r.rep))
}

// A detach interrupted by its lock timeout leaves the partition detach pending, which holds up
// nothing: inserts go on, and the next run finalizes and drops it. A table left detached by a
// run that stopped before dropping it is dropped too; tables not named as mailhook names its
// partitions are not touched.
func TestDropExpiredPartitionsFinishesInterruptedWork(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	jan, feb := month(2025, 1).Add(time.Hour), month(2025, 2).Add(time.Hour)
	recordAt(t, s, statusEvent("int_jan", "m1", domain.StatusDelivered, "", jan), jan, true)
	recordAt(t, s, statusEvent("int_feb", "m2", domain.StatusDelivered, "", feb), feb, true)
	// The February partition of the bodies was detached, and the run stopped there.
	_, err := s.Pool().Exec(ctx, `ALTER TABLE notification_bodies DETACH PARTITION notification_bodies_p20250201_20250301`)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `CREATE TABLE event_payloads_p20250101_archive (LIKE event_payloads)`)
	require.NoError(t, err)

	endReader := holdReader(t, s)
	_, err = s.Retention.DropExpiredPartitions(ctx, domain.DropOptions{Before: month(2025, 3), LockTimeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, store.ErrLockTimeout)
	p, ok := partitionNamed(t, s, store.PayloadsTable, "event_payloads_p20250101_20250201")
	require.True(t, ok)
	assert.True(t, p.DetachPending, "the interrupted detach is pending")
	_, err = s.Events.RecordEvent(ctx, statusEvent("int_new", "m3", domain.StatusDelivered, "", time.Now()))
	require.NoError(t, err, "a pending detach does not hold up inserts")
	endReader()

	rep, err := s.Retention.DropExpiredPartitions(ctx, domain.DropOptions{Before: month(2025, 3)})
	require.NoError(t, err)
	byName := map[string]domain.DroppedPartition{}
	for _, d := range rep.Dropped {
		byName[d.Name] = d
	}
	assert.ElementsMatch(t, []string{
		"event_payloads_p20250101_20250201", "event_payloads_p20250201_20250301",
		"notification_bodies_p20250101_20250201", "notification_bodies_p20250201_20250301",
	}, droppedNames(rep))
	assert.True(t, byName["event_payloads_p20250101_20250201"].Finalized)
	assert.True(t, byName["notification_bodies_p20250201_20250301"].Leftover)
	assert.False(t, byName["event_payloads_p20250201_20250301"].Finalized)
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM pg_class WHERE relname = 'event_payloads_p20250101_archive'`))
	_, _, _, err = s.Events.StoredEvent(ctx, provider, "int_new")
	require.NoError(t, err)
}

// Processed events' keys older than the cutoff go in batches, with their replays, their
// notifications (a re-notifying replay's too) and any payload a kept partition still holds;
// unprocessed and recent keys stay, and so does the message history.
func TestPruneDedupeKeys(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	old := month(2024, 1).Add(time.Hour)
	for _, id := range []string{"pr_a", "pr_b", "pr_c", "pr_d", "pr_e"} {
		recordAt(t, s, statusEvent(id, "pm_"+id, domain.StatusDelivered, "", old), old, true)
	}
	_, err := s.Events.ApplyStatus(ctx, statusEvent("pr_a", "pm_pr_a", domain.StatusDelivered, "", old), rules)
	require.NoError(t, err)
	notifyAt(t, s, "pr_a", "app", old, false)
	_, err = s.Replays.ReserveReplay(ctx, provider, "pr_a", "postscale:pr_a:replay:", true, "ops")
	require.NoError(t, err)
	_, err = s.Replays.ReserveReplay(ctx, provider, "pr_a", "postscale:pr_a:replay:", false, "ops")
	require.NoError(t, err)
	notifyAt(t, s, domain.ReplayNotificationEventID("pr_a", 1), "app", old, false)
	recordAt(t, s, statusEvent("pr_unprocessed", "pm_u", domain.StatusDelivered, "", old), old, false)
	recent := month(2025, 6)
	recordAt(t, s, statusEvent("pr_recent", "pm_r", domain.StatusDelivered, "", recent), recent, true)

	var batches []domain.PruneReport
	rep, err := s.Retention.PruneDedupeKeys(ctx, domain.PruneOptions{Before: month(2025, 1), Batch: 2,
		Progress: func(r domain.PruneReport) { batches = append(batches, r) }})
	require.NoError(t, err)
	assert.Equal(t, domain.PruneReport{Keys: 5, Replays: 2, Notifications: 2, NotificationBodies: 2, Payloads: 5, Batches: 3}, rep)
	require.Len(t, batches, 3)
	assert.Equal(t, []int64{2, 4, 5}, []int64{batches[0].Keys, batches[1].Keys, batches[2].Keys})

	assert.Equal(t, []string{"pr_recent", "pr_unprocessed"}, eventIDs(t, s))
	assert.Zero(t, countRows(t, s, `SELECT count(*) FROM replays`))
	assert.Zero(t, countRows(t, s, `SELECT count(*) FROM notifications`))
	assert.Zero(t, countRows(t, s, `SELECT count(*) FROM notification_bodies`))
	assert.Equal(t, 2, countRows(t, s, `SELECT count(*) FROM event_payloads`))
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM message_events WHERE event_id = 'pr_a'`), "the history stays")
	_, err = s.Messages.GetMessage(ctx, provider, "pm_pr_a")
	require.NoError(t, err, "the message stays")

	again, err := s.Retention.PruneDedupeKeys(ctx, domain.PruneOptions{Before: month(2025, 1)})
	require.NoError(t, err)
	assert.Equal(t, domain.PruneReport{Batches: 1}, again)

	// Past the window a re-delivery is new again.
	res, err := s.Events.RecordEvent(ctx, statusEvent("pr_b", "pm_pr_b", domain.StatusDelivered, "", old))
	require.NoError(t, err)
	assert.True(t, res.Inserted)
}

func eventIDs(t *testing.T, s *store.Store) []string {
	t.Helper()
	rows, err := s.Pool().Query(t.Context(), `SELECT event_id FROM webhook_events ORDER BY event_id`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}
