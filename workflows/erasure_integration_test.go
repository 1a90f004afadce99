package workflows_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
	"github.com/mailhook/mailhook/workflows"
)

// erasureKey is the integration tests' erasure.hash_key.
var erasureKey = bytes.Repeat([]byte("w"), erasure.MinKeyBytes)

// erasureEnv is a database of LoadErasureBench's events and a dev server, with what starts
// erasures on them and runs their workers.
type erasureEnv struct {
	t     testing.TB
	srv   *testenv.DevServer
	st    *store.Store
	queue string
	er    *serve.Erasures
}

func newErasureEnv(t testing.TB, events int) *erasureEnv {
	t.Helper()
	srv := testenv.StartTemporal(t, testenv.DevServerOptions{})
	h, err := erasure.NewHasher(erasureKey)
	require.NoError(t, err)
	st := storetest.OpenWith(t, store.Options{ErasureHasher: h})
	require.NoError(t, storetest.LoadErasureBench(t.Context(), st, storetest.Pool(t, st), events))
	queue := "erasure-" + testenv.RandomName("q")
	return &erasureEnv{t: t, srv: srv, st: st, queue: queue,
		er: &serve.Erasures{Jobs: st.Erasures, Temporal: srv.Client(), TaskQueue: queue}}
}

// worker starts a worker of the env's task queue whose erasure activities use es (the store, or
// a wrapper of it) and read blocks pages per batch; stop stops it (WorkerStopTimeout 0: its
// running activities are canceled at once, as when a worker dies).
func (e *erasureEnv) worker(es activities.ErasureStore, blocks int64) (stop func()) {
	e.t.Helper()
	w := worker.New(e.srv.Client(), e.queue, worker.Options{DeadlockDetectionTimeout: testenv.DeadlockDetectionTimeout})
	workflows.NewProcessor(config.Defaults()).Register(w)
	(&activities.Erasure{Store: es, BatchBlocks: blocks}).Register(w)
	require.NoError(e.t, w.Start())
	var once sync.Once
	stop = func() { once.Do(w.Stop) }
	e.t.Cleanup(stop)
	return stop
}

// erase starts an erasure and waits for its outcome.
func (e *erasureEnv) erase(req store.ErasureRequest) (store.Erasure, error) {
	e.t.Helper()
	job, err := e.er.StartErasure(e.t.Context(), req)
	require.NoError(e.t, err)
	return e.er.WaitErasure(e.t.Context(), job.ID)
}

// stallingStore stalls ErasurePhase of one phase after a few batches until its activity is
// canceled, and says when it has: the worker under it is then stopped mid-phase.
type stallingStore struct {
	activities.ErasureStore
	phase   string
	after   int
	stalled chan struct{}
	once    sync.Once
}

func (s *stallingStore) ErasurePhase(ctx context.Context, id int64, phase string, o domain.PhaseOptions) (domain.ErasureJob, bool, error) {
	if phase == s.phase {
		batches, progress := 0, o.Progress
		o.Progress = func(j domain.ErasureJob) {
			progress(j)
			if batches++; batches == s.after {
				s.once.Do(func() { close(s.stalled) })
				<-ctx.Done()
			}
		}
	}
	return s.ErasureStore.ErasurePhase(ctx, id, phase, o)
}

var bench = store.ErasureRequest{Address: storetest.ErasureBenchAddress, ErasedBy: "ops", Reason: "ticket 4711"}

// An erasure survives the worker that ran it: stopped in the middle of the event_payloads step
// (its activity canceled after three batches), it goes on in another worker from the job's
// cursor, and ends with exactly the counts a dry run found, each row written once (a trigger
// counts every update and delete), one audit row, and the address nowhere. The history holds no
// address, and shows the step's second attempt.
func TestErasureWorkflowSurvivesItsWorker(t *testing.T) {
	t.Parallel()
	e := newErasureEnv(t, 20_000)
	ctx := t.Context()
	stopPlain := e.worker(e.st.Erasures, 16)
	dry := bench
	dry.DryRun = true
	want, err := e.erase(dry)
	require.NoError(t, err)
	require.Equal(t, int64(4), want.Counts["event_payloads"], "%v", want.Counts)
	stopPlain()
	pool := storetest.Pool(t, e.st)
	storetest.CountWrites(t, ctx, pool)

	stalling := &stallingStore{ErasureStore: e.st.Erasures, phase: "event_payloads", after: 3, stalled: make(chan struct{})}
	stopFirst := e.worker(stalling, 16)
	job, err := e.er.StartErasure(ctx, bench)
	require.NoError(t, err)
	testenv.WaitUntil(t, "the event_payloads step stalled after three batches", testenv.Stall, func() bool {
		select {
		case <-stalling.stalled:
			return true
		default:
			return false
		}
	})
	stopFirst()
	mid, err := e.st.Erasures.ErasureJob(ctx, job.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ErasureRunning, mid.Status)
	require.Equal(t, "event_payloads", mid.Phase)

	e.worker(e.st.Erasures, 16)
	got, err := e.er.WaitErasure(ctx, job.ID)
	require.NoError(t, err)
	assert.Equal(t, want.Counts, got.Counts, "the resumed job's counts are the dry run's")
	assert.Equal(t, want.Counts, storetest.Writes(t, ctx, pool), "each row written once")
	var audits int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM erasures`).Scan(&audits))
	assert.Equal(t, 1, audits, "one audit row")
	hits, err := storetest.Hits(ctx, pool, storetest.ErasureBenchAddress, "target%40example.com")
	require.NoError(t, err)
	assert.Empty(t, hits)

	h := historyOf(t, e.srv.Client(), domain.ErasureWorkflowID(job.ID, e.queue))
	assert.Greater(t, h.attempts[activities.ErasePhaseName], h.activities[activities.ErasePhaseName], "a step ran a second attempt")
	require.Contains(t, h.json, `"phase":"event_payloads"`, "the payloads are read as JSON")
	for _, secret := range []string{"target@", "target%40", erasure.HashPrefix, "ticket 4711"} {
		if strings.Contains(strings.ToLower(h.json), strings.ToLower(secret)) {
			i := strings.Index(strings.ToLower(h.json), strings.ToLower(secret))
			t.Errorf("the history holds %q: …%s…", secret, h.json[max(0, i-300):min(len(h.json), i+100)])
		}
	}

	// Erasing again finds nothing, and writes nothing but its audit row.
	again, err := e.erase(bench)
	require.NoError(t, err)
	assert.Zero(t, again.Total)
	assert.Equal(t, want.Counts, storetest.Writes(t, ctx, pool))
}

// A job an older version left running (no workflow: it ran it in its own process, and stopped
// mid-step) is started by the worker's start (serve.Erasures.StartRunning) and completes from its
// cursor, with the counts a dry run found.
func TestErasureJobLeftByAnOlderVersionCompletes(t *testing.T) {
	t.Parallel()
	e := newErasureEnv(t, 20_000)
	ctx := t.Context()
	e.worker(e.st.Erasures, 16)
	dry := bench
	dry.DryRun = true
	want, err := e.erase(dry)
	require.NoError(t, err)

	// What the older version left: the check done, event_payloads half-way.
	job, err := e.st.Erasures.StartErasure(ctx, bench)
	require.NoError(t, err)
	for _, p := range []string{"check", "check:webhook_events"} {
		_, _, err := e.st.Erasures.ErasurePhase(ctx, job.ID, p, domain.PhaseOptions{BatchBlocks: 16})
		require.NoError(t, err)
	}
	stop, cancel := context.WithCancel(ctx)
	_, _, err = e.st.Erasures.ErasurePhase(stop, job.ID, "event_payloads", domain.PhaseOptions{BatchBlocks: 16, Progress: func(j domain.ErasureJob) {
		if j.Counts["event_payloads"] > 0 {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)

	e.er.StartRunning(ctx, testenv.Logger())
	got, err := e.er.WaitErasure(ctx, job.ID)
	require.NoError(t, err)
	assert.Equal(t, want.Counts, got.Counts)
	assert.NotZero(t, got.ID)
	ids, err := e.st.Erasures.RunningErasureJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, ids)
}

var payloadData = regexp.MustCompile(`"data":"([A-Za-z0-9+/=]+)"`)

// history is what one job's runs cost in Temporal, read from their histories.
type history struct {
	runs, continuedAsNew, workflowTasks, markers, events, bytes int
	activities, attempts                                        map[string]int
	json                                                        string
	// dispatch is the time from scheduling each activity to its (last) start, run from start to
	// completion, and closed from the run's start to its end: Temporal's share is closed - run.
	dispatch, run, closed time.Duration
}

// historyOf reads every run of a workflow ID, from its first (following continue-as-new).
func historyOf(t testing.TB, c client.Client, id string) history {
	t.Helper()
	ctx := t.Context()
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	out := history{activities: map[string]int{}, attempts: map[string]int{}}
	scheduled := map[int64]string{}
	var text strings.Builder
	for run := d.GetWorkflowExecutionInfo().GetFirstRunId(); run != ""; {
		out.runs++
		var events []*historypb.HistoryEvent
		it := c.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			events = append(events, ev)
		}
		run = ""
		scheduledAt, startedAt := map[int64]time.Time{}, map[int64]time.Time{}
		for _, ev := range events {
			at := ev.GetEventTime().AsTime()
			switch {
			case ev.GetWorkflowTaskCompletedEventAttributes() != nil:
				out.workflowTasks++
			case ev.GetMarkerRecordedEventAttributes() != nil:
				out.markers++
			case ev.GetActivityTaskScheduledEventAttributes() != nil:
				name := ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
				scheduled[ev.GetEventId()] = name
				scheduledAt[ev.GetEventId()] = at
				out.activities[name]++
			case ev.GetActivityTaskStartedEventAttributes() != nil:
				a := ev.GetActivityTaskStartedEventAttributes()
				out.attempts[scheduled[a.GetScheduledEventId()]] += int(a.GetAttempt())
				out.dispatch += at.Sub(scheduledAt[a.GetScheduledEventId()])
				startedAt[a.GetScheduledEventId()] = at
			case ev.GetActivityTaskCompletedEventAttributes() != nil:
				out.run += at.Sub(startedAt[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()])
			case ev.GetWorkflowExecutionContinuedAsNewEventAttributes() != nil:
				out.continuedAsNew++
				run = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
			}
		}
		if len(events) > 0 {
			out.closed += events[len(events)-1].GetEventTime().AsTime().Sub(events[0].GetEventTime().AsTime())
		}
		hist := &historypb.History{Events: events}
		out.events += len(events)
		out.bytes += proto.Size(hist)
		raw, err := protojson.Marshal(hist)
		require.NoError(t, err)
		text.Write(raw)
		// The payloads (inputs, results, summaries, details) as their JSON, not base64.
		for _, m := range payloadData.FindAllSubmatch(raw, -1) {
			if data, err := base64.StdEncoding.DecodeString(string(m[1])); err == nil {
				text.Write(data)
			}
		}
	}
	out.json = text.String()
	return out
}

func (h history) String() string {
	return fmt.Sprintf("%d runs (%d continue-as-new), %d workflow tasks, %d activity tasks %v (attempts %v), %d local activities, %d events, %d bytes; "+
		"run %s, of which activities ran %s and waited %s for a worker",
		h.runs, h.continuedAsNew, h.workflowTasks, sum(h.attempts), h.activities, h.attempts, h.markers, h.events, h.bytes,
		h.closed.Round(time.Millisecond), h.run.Round(time.Millisecond), h.dispatch.Round(time.Millisecond))
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// BenchmarkErasureWorkflow measures erasing one address among MAILHOOK_ERASE_BENCH_EVENTS
// events (100,000 unless set) through the Erasure workflow on a dev server and a worker in this
// process, as production runs it: the first erasure (first-ms, from the start to the answer),
// what it cost in Temporal, and each later one, which finds nothing left (ns/op). Compare with
// internal/store's BenchmarkErase, the same phases without Temporal (docs/BENCHMARKS.md).
//
//	MAILHOOK_ERASE_BENCH_EVENTS=1000000 go test -run '^$' -bench BenchmarkErasureWorkflow -benchtime 1x ./workflows/
func BenchmarkErasureWorkflow(b *testing.B) {
	events := 100_000
	if v := os.Getenv("MAILHOOK_ERASE_BENCH_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err, "MAILHOOK_ERASE_BENCH_EVENTS")
		events = n
	}
	e := newErasureEnv(b, events)
	ctx := b.Context()
	_, err := storetest.Pool(b, e.st).Exec(ctx, `VACUUM ANALYZE`)
	require.NoError(b, err)
	e.worker(e.st.Erasures, 0)

	start := time.Now()
	first, err := e.erase(bench)
	require.NoError(b, err)
	took := time.Since(start)
	require.Equal(b, int64(events/5000), first.Counts["event_payloads"], "%v", first.Counts)
	h := historyOf(b, e.srv.Client(), domain.ErasureWorkflowID(first.JobID, e.queue))
	job, err := e.st.Erasures.ErasureJob(ctx, first.JobID)
	require.NoError(b, err)
	raw, _ := json.Marshal(first.Counts)
	b.Logf("first erasure: %s in %s, %d batches; Temporal: %s", raw, took.Round(time.Millisecond), job.Batches, h)

	var last store.Erasure
	for b.Loop() {
		last, err = e.erase(bench)
		require.NoError(b, err)
		require.Zero(b, last.Total)
	}
	b.Logf("a later erasure (nothing left): %s", historyOf(b, e.srv.Client(), domain.ErasureWorkflowID(last.JobID, e.queue)))
	b.ReportMetric(float64(took.Milliseconds()), "first-ms")
	b.ReportMetric(float64(first.Total), "rows-changed")
	b.ReportMetric(float64(job.Batches), "first-batches")
	b.ReportMetric(float64(h.workflowTasks), "workflow-tasks")
	b.ReportMetric(float64(sum(h.attempts)), "activity-tasks")
	b.ReportMetric(float64(h.bytes), "history-bytes")
	b.ReportMetric(float64(h.continuedAsNew), "continue-as-new")
}
