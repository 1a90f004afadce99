package workflows_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/workflows"
)

const day = 24 * time.Hour

var (
	retentionIn    = domain.RetentionInput{Payloads: 30 * day, DedupeKeys: 400 * day, PartitionsAhead: 3}
	retentionStart = time.Date(2026, 12, 1, 1, 15, 0, 0, time.UTC)
)

func newRetentionEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	env := newEnv(t)
	(&activities.Retention{}).Register(env)
	env.SetStartTime(retentionStart)
	return env
}

// steps records the order the activities ran in.
type steps struct {
	mu    sync.Mutex
	names []string
}

func (s *steps) ran(name string) func(mock.Arguments) {
	return func(mock.Arguments) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.names = append(s.names, name)
	}
}

var dropped = domain.PartitionReport{
	Dropped: []domain.DroppedPartition{{Name: "event_payloads_p20261001_20261101", Bytes: 1 << 20}},
	Kept: []domain.KeptPartition{{Name: "notification_bodies_p20261001_20261101",
		Reason: domain.KeptPendingNotifications, PendingNotifications: 2}},
}

// A run creates partitions ahead, moves legacy payloads, drops expired partitions and prunes
// keys, in that order, each with the cutoff of its own retention counted back from the time the
// run started; the result says what each step did.
func TestRetentionRunsEveryStepWithItsCutoff(t *testing.T) {
	env := newRetentionEnv(t)
	var order steps
	parts := activities.PartitionsInput{Ahead: 3}
	env.OnActivity(activities.CreatePartitionsName, mock.Anything, parts).
		Run(order.ran("create")).Return([]string{"event_payloads_p20270301_20270401"}, nil).Once()
	env.OnActivity(activities.MoveLegacyPayloadsName, mock.Anything, parts).
		Run(order.ran("legacy")).Return(activities.LegacyResult{Moved: 7}, nil).Once()
	env.OnActivity(activities.DropExpiredPartitionsName, mock.Anything,
		mock.MatchedBy(func(in activities.DropInput) bool { return in.Before.Equal(retentionStart.Add(-30 * day)) })).
		Run(order.ran("drop")).Return(dropped, nil).Once()
	pruned := activities.PruneResult{PruneReport: domain.PruneReport{Keys: 12, Notifications: 3, Batches: 1}}
	env.OnActivity(activities.PruneDedupeKeysName, mock.Anything,
		mock.MatchedBy(func(in activities.PruneInput) bool { return in.Before.Equal(retentionStart.Add(-400 * day)) })).
		Run(order.ran("prune")).Return(pruned, nil).Once()

	env.ExecuteWorkflow(domain.RetentionName, retentionIn)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res workflows.RetentionResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, []string{"create", "legacy", "drop", "prune"}, order.names)
	assert.True(t, res.PayloadsBefore.Equal(retentionStart.Add(-30*day)))
	require.NotNil(t, res.DedupeKeysBefore)
	assert.True(t, res.DedupeKeysBefore.Equal(retentionStart.Add(-400*day)))
	assert.Equal(t, []string{"event_payloads_p20270301_20270401"}, res.PartitionsCreated)
	assert.Equal(t, activities.LegacyResult{Moved: 7}, res.LegacyPayloads)
	assert.Equal(t, dropped, res.Partitions)
	assert.Equal(t, &pruned, res.DedupeKeys)
	assert.Empty(t, res.Errors)
}

// Dedupe keys kept forever: no prune step, no cutoff. Daily partitions are asked for as such.
func TestRetentionKeepsKeysForever(t *testing.T) {
	env := newRetentionEnv(t)
	in := retentionIn
	in.DedupeKeys, in.DailyPartitions, in.PartitionsAhead = 0, true, 5
	parts := activities.PartitionsInput{Daily: true, Ahead: 5}
	env.OnActivity(activities.CreatePartitionsName, mock.Anything, parts).Return([]string{}, nil).Once()
	env.OnActivity(activities.MoveLegacyPayloadsName, mock.Anything, parts).Return(activities.LegacyResult{}, nil).Once()
	env.OnActivity(activities.DropExpiredPartitionsName, mock.Anything, mock.Anything).Return(domain.PartitionReport{}, nil).Once()

	env.ExecuteWorkflow(domain.RetentionName, in)
	require.NoError(t, env.GetWorkflowError())
	var res workflows.RetentionResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Nil(t, res.DedupeKeysBefore)
	assert.Nil(t, res.DedupeKeys)
}

// A step that keeps failing is retried, then reported; the steps after it still run, and the
// run fails with what every step did in the failure's details, so it shows as failed in the UI.
func TestRetentionReportsAStepThatFailedAndRunsTheRest(t *testing.T) {
	env := newRetentionEnv(t)
	env.OnActivity(activities.CreatePartitionsName, mock.Anything, mock.Anything).Return([]string{}, nil).Once()
	env.OnActivity(activities.MoveLegacyPayloadsName, mock.Anything, mock.Anything).Return(activities.LegacyResult{}, nil).Once()
	env.OnActivity(activities.DropExpiredPartitionsName, mock.Anything, mock.Anything).
		Return(domain.PartitionReport{}, errors.New("detach event_payloads_p20261001_20261101: lock timeout")).Times(5)
	env.OnActivity(activities.PruneDedupeKeysName, mock.Anything, mock.Anything).
		Return(activities.PruneResult{PruneReport: domain.PruneReport{Keys: 4, Batches: 1}}, nil).Once()

	env.ExecuteWorkflow(domain.RetentionName, retentionIn)
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, workflows.ErrTypeRetentionIncomplete, appErr.Type())
	assert.Contains(t, appErr.Message(), activities.DropExpiredPartitionsName)
	var res workflows.RetentionResult
	require.NoError(t, appErr.Details(&res))
	require.Len(t, res.Errors, 1)
	assert.Equal(t, activities.DropExpiredPartitionsName, res.Errors[0].Step)
	assert.Contains(t, res.Errors[0].Error, "lock timeout")
	require.NotNil(t, res.DedupeKeys, "the prune ran after the failed drop")
	assert.Equal(t, int64(4), res.DedupeKeys.Keys)
}

// An input that would remove more than config can ask for runs nothing.
func TestRetentionRefusesABadInput(t *testing.T) {
	for name, in := range map[string]domain.RetentionInput{
		"no payload retention":        {DedupeKeys: 400 * day, PartitionsAhead: 3},
		"keys shorter than payloads":  {Payloads: 30 * day, DedupeKeys: day, PartitionsAhead: 3},
		"no partitions ahead":         {Payloads: 30 * day},
		"payloads shorter than a day": {Payloads: time.Hour, PartitionsAhead: 3},
	} {
		t.Run(name, func(t *testing.T) {
			env := newRetentionEnv(t)
			env.ExecuteWorkflow(domain.RetentionName, in)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, env.GetWorkflowError(), &appErr)
			assert.Equal(t, "BadInput", appErr.Type())
		})
	}
}

// retention.inbound_bodies between 0 and payloads: the bodies of inbound emails processed
// before its cutoff are removed after the legacy move (which the strip reads from) and before
// the drop.
func TestRetentionStripsInboundBodiesAfterTheirOwnTime(t *testing.T) {
	env := newRetentionEnv(t)
	in := retentionIn
	in.InboundBodies = 7 * day
	var order steps
	env.OnActivity(activities.CreatePartitionsName, mock.Anything, mock.Anything).Run(order.ran("create")).Return([]string{}, nil).Once()
	env.OnActivity(activities.MoveLegacyPayloadsName, mock.Anything, mock.Anything).Run(order.ran("legacy")).Return(activities.LegacyResult{}, nil).Once()
	env.OnActivity(activities.StripInboundBodiesName, mock.Anything,
		mock.MatchedBy(func(in activities.StripInput) bool { return in.Before.Equal(retentionStart.Add(-7 * day)) })).
		Run(order.ran("strip")).Return(activities.StripResult{Stripped: 4}, nil).Once()
	env.OnActivity(activities.DropExpiredPartitionsName, mock.Anything, mock.Anything).Run(order.ran("drop")).Return(domain.PartitionReport{}, nil).Once()
	env.OnActivity(activities.PruneDedupeKeysName, mock.Anything, mock.Anything).Run(order.ran("prune")).Return(activities.PruneResult{}, nil).Once()

	env.ExecuteWorkflow(domain.RetentionName, in)
	require.NoError(t, env.GetWorkflowError())
	var res workflows.RetentionResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, []string{"create", "legacy", "strip", "drop", "prune"}, order.names)
	assert.Equal(t, &activities.StripResult{Stripped: 4}, res.InboundBodies)
}

// With retention.audit in its input, a run prunes the audit trail after its other steps, with the
// audit's own cutoff; an input without it (scheduled by an earlier version) never does.
func TestRetentionPrunesTheAuditTrail(t *testing.T) {
	env := newRetentionEnv(t)
	in := retentionIn
	in.Audit = 365 * day
	env.OnActivity(activities.CreatePartitionsName, mock.Anything, mock.Anything).Return([]string{}, nil)
	env.OnActivity(activities.MoveLegacyPayloadsName, mock.Anything, mock.Anything).Return(activities.LegacyResult{}, nil)
	env.OnActivity(activities.DropExpiredPartitionsName, mock.Anything, mock.Anything).Return(domain.PartitionReport{}, nil)
	env.OnActivity(activities.PruneDedupeKeysName, mock.Anything, mock.Anything).Return(activities.PruneResult{}, nil)
	env.OnActivity(activities.PruneAuditName, mock.Anything,
		mock.MatchedBy(func(in activities.PruneAuditInput) bool { return in.Before.Equal(retentionStart.Add(-365 * day)) })).
		Return(activities.PruneAuditResult{Deleted: 4}, nil).Once()
	env.ExecuteWorkflow(domain.RetentionName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res workflows.RetentionResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.NotNil(t, res.Audit)
	assert.EqualValues(t, 4, res.Audit.Deleted)

	env = newRetentionEnv(t)
	env.OnActivity(activities.CreatePartitionsName, mock.Anything, mock.Anything).Return([]string{}, nil)
	env.OnActivity(activities.MoveLegacyPayloadsName, mock.Anything, mock.Anything).Return(activities.LegacyResult{}, nil)
	env.OnActivity(activities.DropExpiredPartitionsName, mock.Anything, mock.Anything).Return(domain.PartitionReport{}, nil)
	env.OnActivity(activities.PruneDedupeKeysName, mock.Anything, mock.Anything).Return(activities.PruneResult{}, nil)
	env.ExecuteWorkflow(domain.RetentionName, retentionIn)
	require.NoError(t, env.GetWorkflowError())
	require.NoError(t, env.GetWorkflowResult(&res))
	env.AssertNotCalled(t, "PruneAudit", mock.Anything, mock.Anything)
}
