package workflows_test

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/workflows"
)

// fakeJob is an erasure job as the activities would find it in PostgreSQL: each ErasePhase
// call changes the phase's table by changed[table] rows in one batch (more times more, when
// set), the check counts inboundTo. It records the calls.
type fakeJob struct {
	state     activities.ErasureState
	changed   map[string]int64
	inboundTo int64
	more      map[string]int // phase → calls that end with More before the last
	calls     []activities.ErasePhaseInput
	finished  []string
}

func newFakeJob(scope string, force, dryRun bool) *fakeJob {
	counts := map[string]int64{}
	for _, t := range erasure.Tables {
		counts[t] = 0
	}
	return &fakeJob{state: activities.ErasureState{
		ErasureResult: domain.ErasureResult{JobID: 7, Status: "running", DryRun: dryRun, Counts: counts},
		Scope:         scope, Force: force, Phases: len(erasure.Plan(scope, force, dryRun)),
	}, changed: map[string]int64{}, more: map[string]int{}}
}

func (f *fakeJob) register(env *testsuite.TestWorkflowEnvironment) {
	(&activities.Erasure{}).Register(env)
	env.OnActivity(activities.BeginErasureName, mock.Anything, activities.ErasureJobInput{JobID: 7}).Return(
		func(context.Context, activities.ErasureJobInput) (activities.ErasureState, error) {
			return f.snapshot(), nil
		})
	env.OnActivity(activities.ErasePhaseName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ErasePhaseInput) (activities.ErasePhaseResult, error) {
			f.calls = append(f.calls, in)
			if in.JobID != 7 {
				return activities.ErasePhaseResult{}, errors.New("wrong job")
			}
			phases := erasure.Plan(f.state.Scope, f.state.Force, f.state.DryRun)
			p := phases[erasure.PhaseIndex(phases, in.Phase)]
			f.state.Phase, f.state.PhasesDone = p.Name, erasure.PhaseIndex(phases, in.Phase)
			f.state.Batches++
			if f.more[p.Name] > 0 {
				f.more[p.Name]--
				return activities.ErasePhaseResult{Job: f.snapshot(), More: true, Batches: 1}, nil
			}
			if p.Check {
				if p.Name == erasure.CheckPhase {
					f.state.InboundTo += f.inboundTo
				}
			} else {
				f.state.Counts[p.Table] += f.changed[p.Table]
				f.state.Total += f.changed[p.Table]
			}
			return activities.ErasePhaseResult{Job: f.snapshot(), Batches: 1}, nil
		}).Maybe()
	env.OnActivity(activities.FinishErasureName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishErasureInput) (activities.ErasureState, error) {
			f.finished = append(f.finished, in.Status)
			f.state.Status, f.state.Phase = in.Status, ""
			if in.Status == domain.ErasureDone && !f.state.DryRun {
				f.state.ErasureID = 3
			}
			return f.snapshot(), nil
		}).Maybe()
}

func (f *fakeJob) snapshot() activities.ErasureState {
	s := f.state
	s.Counts = maps.Clone(f.state.Counts)
	return s
}

func (f *fakeJob) phases() []string {
	var out []string
	for _, c := range f.calls {
		out = append(out, c.Phase)
	}
	return out
}

func runErasure(t *testing.T, f *fakeJob) (*testsuite.TestWorkflowEnvironment, domain.ErasureResult) {
	t.Helper()
	env := newEnv(t)
	f.register(env)
	env.ExecuteWorkflow(domain.ErasureName, domain.ErasureInput{JobID: 7})
	require.True(t, env.IsWorkflowCompleted())
	var res domain.ErasureResult
	if err := env.GetWorkflowError(); err == nil {
		require.NoError(t, env.GetWorkflowResult(&res))
	}
	return env, res
}

// A real erasure of every scope runs the check, then one step per table in erasure.Plan's order,
// deletes the runs keyed by the address once, before the first change, and ends done with the
// audit row; the result says what each table had changed.
func TestErasureRunsEveryPhaseInOrder(t *testing.T) {
	f := newFakeJob(erasure.ScopeAll, false, false)
	f.changed = map[string]int64{"event_payloads": 5, "messages": 3, "suppressions": 1}
	env, res := runErasure(t, f)
	require.NoError(t, env.GetWorkflowError())
	want := []string{"check", "check:webhook_events"}
	want = append(want, erasure.Tables...)
	assert.Equal(t, want, f.phases())
	for i, c := range f.calls {
		assert.Equal(t, i == 2, c.DeleteKeyedRuns, "call %d (%s) deletes the keyed runs: only the first step's", i, c.Phase)
	}
	assert.Equal(t, []string{domain.ErasureDone}, f.finished)
	assert.Equal(t, domain.ErasureDone, res.Status)
	assert.Equal(t, int64(3), res.ErasureID)
	assert.Equal(t, int64(9), res.Total)
	assert.Equal(t, int64(5), res.Counts["event_payloads"])
}

// A mailbox of yours (inbound emails were sent to it) is refused after the check: no step runs,
// the job ends refused, with no audit row.
func TestErasureRefusesAMailboxOfYoursAfterTheCheck(t *testing.T) {
	f := newFakeJob(erasure.ScopeAll, false, false)
	f.inboundTo, f.changed = 2, map[string]int64{"event_payloads": 5}
	env, res := runErasure(t, f)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []string{"check", "check:webhook_events"}, f.phases())
	assert.Equal(t, []string{domain.ErasureRefused}, f.finished)
	assert.Equal(t, domain.ErasureRefused, res.Status)
	assert.Equal(t, int64(2), res.InboundTo)
	assert.Zero(t, res.ErasureID)
	assert.Zero(t, res.Total)
}

// A dry run has no check and deletes nothing in Temporal; forced and inbound-scoped erasures skip
// the check, the inbound scope runs only its four steps.
func TestErasureSettingsDecideThePhases(t *testing.T) {
	dry := newFakeJob(erasure.ScopeAll, false, true)
	dry.inboundTo = 2
	env, res := runErasure(t, dry)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, erasure.Tables, dry.phases())
	for _, c := range dry.calls {
		assert.False(t, c.DeleteKeyedRuns, c.Phase)
	}
	assert.True(t, res.DryRun)
	assert.Zero(t, res.ErasureID)

	forced := newFakeJob(erasure.ScopeAll, true, false)
	forced.inboundTo = 2
	env, res = runErasure(t, forced)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, erasure.Tables, forced.phases())
	assert.True(t, forced.calls[0].DeleteKeyedRuns)
	assert.Equal(t, domain.ErasureDone, res.Status)

	inbound := newFakeJob(erasure.ScopeInbound, false, false)
	env, _ = runErasure(t, inbound)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []string{"event_payloads", "webhook_events", "notification_bodies", "notifications", "rejected_requests"}, inbound.phases())
	assert.False(t, inbound.calls[0].DeleteKeyedRuns, "the inbound scope re-keys nothing")
}

// A run takes the job up at its cursor's phase (a worker died, a continue-as-new, a job an older
// version left), and a job that ended answers how it ended without running anything.
func TestErasureResumesAtTheCursor(t *testing.T) {
	f := newFakeJob(erasure.ScopeAll, false, false)
	f.state.Phase = "messages"
	env, res := runErasure(t, f)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []string{"messages", "message_events", "soft_bounces", "suppressions", "suppression_lifts", "rejected_requests"}, f.phases())
	assert.Equal(t, domain.ErasureDone, res.Status)

	ended := newFakeJob(erasure.ScopeAll, false, false)
	ended.state.Status, ended.state.ErasureID = domain.ErasureDone, 9
	env, res = runErasure(t, ended)
	require.NoError(t, env.GetWorkflowError())
	assert.Empty(t, ended.calls)
	assert.Empty(t, ended.finished)
	assert.Equal(t, int64(9), res.ErasureID)
}

// A phase whose activity ran out of time (More) is called again, and a run that made
// erasureCallsPerRun calls continues as new, so the history of a job over any amount of data
// stays bounded; the next run takes the job up from its cursor.
func TestErasureCallsAPhaseAgainAndContinuesAsNew(t *testing.T) {
	f := newFakeJob(erasure.ScopeAll, true, false)
	f.more["event_payloads"] = 2
	env, res := runErasure(t, f)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, append([]string{"event_payloads", "event_payloads"}, erasure.Tables...), f.phases())
	assert.True(t, f.calls[0].DeleteKeyedRuns)
	assert.False(t, f.calls[1].DeleteKeyedRuns, "only the first call of the phase")
	assert.Equal(t, domain.ErasureDone, res.Status)

	defer workflows.SetErasureCallsPerRun(4)()
	f = newFakeJob(erasure.ScopeAll, true, false)
	f.more["event_payloads"] = 5
	env, _ = runErasure(t, f)
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	assert.Equal(t, domain.ErasureName, can.WorkflowType.Name)
	assert.Len(t, f.calls, 4)
	assert.Empty(t, f.finished)
}
