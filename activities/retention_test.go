package activities_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
)

// retentionStore plays a store whose drop and prune make some progress and then fail once.
type retentionStore struct {
	activities.RetentionStore
	drops  [][]domain.DroppedPartition // the partitions each call drops, in order
	prunes []domain.PruneReport        // each call's batches
	fail   error                       // returned by the first call of each after its progress
	calls  int
}

func (s *retentionStore) DropExpiredPartitions(_ context.Context, o domain.DropOptions) (domain.PartitionReport, error) {
	var rep domain.PartitionReport
	for _, d := range s.drops[s.calls] {
		rep.Dropped = append(rep.Dropped, d)
		o.Progress(rep)
	}
	s.calls++
	if s.calls == 1 {
		return rep, s.fail
	}
	return rep, nil
}

func (s *retentionStore) PruneDedupeKeys(_ context.Context, o domain.PruneOptions) (domain.PruneReport, error) {
	var rep domain.PruneReport
	rep.Add(s.prunes[s.calls])
	o.Progress(rep)
	s.calls++
	if s.calls == 1 {
		return rep, s.fail
	}
	return rep, nil
}

// runAttempts runs an activity as Temporal retries it: an attempt that fails hands its last
// heartbeat (of type D) to the next one. It returns the last attempt's result.
func runAttempts[D, R any](t *testing.T, attempts int, fn, arg any) R {
	t.Helper()
	var (
		details converter.EncodedValues
		out     R
	)
	for i := range attempts {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestActivityEnvironment()
		env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) { details = d })
		if details != nil {
			var prev D
			require.NoError(t, details.Get(&prev))
			env.SetHeartbeatDetails(prev)
		}
		env.RegisterActivity(fn)
		val, err := env.ExecuteActivity(fn, arg)
		if i < attempts-1 {
			require.Error(t, err, "attempt %d", i+1)
			continue
		}
		require.NoError(t, err)
		require.NoError(t, val.Get(&out))
	}
	return out
}

// An attempt that failed after dropping partitions heartbeated them: the retry reports them with
// its own, so the run's result names every partition it dropped.
func TestDropExpiredPartitionsReportsEveryAttempt(t *testing.T) {
	st := &retentionStore{fail: errors.New("lock timeout"), drops: [][]domain.DroppedPartition{
		{{Name: "event_payloads_p20250101_20250201"}},
		{{Name: "event_payloads_p20250201_20250301", Finalized: true}, {Name: "notification_bodies_p20250101_20250201"}},
	}}
	r := &activities.Retention{Store: st}
	rep := runAttempts[domain.PartitionReport, domain.PartitionReport](t, 2, r.DropExpiredPartitions, activities.DropInput{Before: time.Now()})
	var names []string
	for _, d := range rep.Dropped {
		names = append(names, d.Name)
	}
	assert.Equal(t, []string{"event_payloads_p20250101_20250201", "event_payloads_p20250201_20250301", "notification_bodies_p20250101_20250201"}, names)
}

// Likewise the prune's counts add up over its attempts.
func TestPruneDedupeKeysCountsEveryAttempt(t *testing.T) {
	st := &retentionStore{fail: errors.New("connection reset"), prunes: []domain.PruneReport{
		{Keys: 5000, Replays: 1, Batches: 1},
		{Keys: 120, Notifications: 7, Batches: 1},
	}}
	r := &activities.Retention{Store: st}
	res := runAttempts[domain.PruneReport, activities.PruneResult](t, 2, r.PruneDedupeKeys, activities.PruneInput{Before: time.Now()})
	assert.Equal(t, activities.PruneResult{PruneReport: domain.PruneReport{Keys: 5120, Replays: 1, Notifications: 7, Batches: 2}}, res)
}
