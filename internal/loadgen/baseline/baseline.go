// Package baseline measures the ceiling of mailhook's design on a given Temporal server: a
// minimal program that starts trivial workflows straight through the SDK with the same start
// options mailhook uses (workflow ID, reuse policy, three keyword search attributes, a static
// summary, an input of the same size), either with no worker (the start rate) or with a worker
// running a workflow of the same shape as ProcessWebhookEvent — four trivial activities in a row,
// optionally as local activities — to completion (the completion rate). No HTTP, no signature,
// no database: what is left is Temporal's own cost.
package baseline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/internal/loadgen"
)

// Modes.
const (
	ModeStart    = "start"    // no worker: how fast can workflows be started
	ModeComplete = "complete" // worker running: how fast do they finish
)

// Local-activity choices.
const (
	LocalNone = "none" // every step a regular activity, as mailhook does today
	LocalDB   = "db"   // the database steps local, Notify (long durable retries) regular
	LocalAll  = "all"  // every step local
)

// WorkflowName is the baseline workflow type.
const WorkflowName = "BaselineProcess"

// Options configure one baseline run.
type Options struct {
	Temporal         string
	Namespace        string
	TaskQueue        string
	Mode             string
	Concurrency      int
	Duration, Warmup time.Duration
	// Activities is the number of steps (ProcessWebhookEvent runs 4 for a status change:
	// RecordEvent, ApplyStatus, Notify, MarkProcessed; 3 when nothing is notified).
	Activities       int
	Local            string
	PayloadBytes     int
	SearchAttributes bool
	DrainTimeout     time.Duration
	CPU              []loadgen.CPUTarget
	JSONPath         string
	Out              io.Writer
}

// Input is the workflow input: the step count and a pad the size of a mailhook event.
type Input struct {
	Seq   int    `json:"seq"`
	Steps int    `json:"steps"`
	Local string `json:"local,omitempty"`
	Pad   string `json:"pad"`
}

// StepInput is one activity's input; the first steps carry the event as mailhook's do.
type StepInput struct {
	Seq  int    `json:"seq"`
	Step int    `json:"step"`
	Last bool   `json:"last"`
	Pad  string `json:"pad,omitempty"`
}

// Bench holds the workflow, the activity and the completion bookkeeping.
type Bench struct {
	mu   sync.Mutex
	done map[int]time.Time
}

// NewBench returns a Bench ready to register.
func NewBench() *Bench { return &Bench{done: map[int]time.Time{}} }

var stepNames = []string{"RecordEvent", "ApplyStatus", "Notify", "MarkProcessed"}

// stepName mirrors ProcessWebhookEvent's steps: the last is MarkProcessed, Notify before it.
func stepName(i, n int) string {
	switch {
	case i == n-1:
		return "MarkProcessed"
	case i == n-2 && n >= 3:
		return "Notify"
	case i < len(stepNames)-2:
		return stepNames[i]
	default:
		return fmt.Sprintf("Step%d", i)
	}
}

// isLocal says whether step i of n runs as a local activity.
func isLocal(local string, i, n int) bool {
	switch local {
	case LocalAll:
		return true
	case LocalDB:
		return stepName(i, n) != "Notify"
	}
	return false
}

// The same timeouts and retry policy as mailhook's database activities.
var (
	retry = &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute}
	ao    = workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry}
	lao   = workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry}
)

// Workflow runs in.Steps trivial activities one after another.
func (b *Bench) Workflow(ctx workflow.Context, in Input) (string, error) {
	for i := range in.Steps {
		si := StepInput{Seq: in.Seq, Step: i, Last: i == in.Steps-1}
		if !si.Last {
			si.Pad = in.Pad
		}
		var out int
		var f workflow.Future
		if isLocal(in.Local, i, in.Steps) {
			f = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, lao), b.Step, si)
		} else {
			opts := ao
			opts.ActivityID = stepName(i, in.Steps)
			f = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), "BaselineStep", si)
		}
		if err := f.Get(ctx, &out); err != nil {
			return "", err
		}
	}
	return "done", nil
}

// Step is the trivial activity; the last one records the completion (mailhook's MarkProcessed
// sets processed_at the same way).
func (b *Bench) Step(_ context.Context, in StepInput) (int, error) {
	if in.Last {
		now := time.Now()
		b.mu.Lock()
		if _, ok := b.done[in.Seq]; !ok {
			b.done[in.Seq] = now
		}
		b.mu.Unlock()
	}
	return in.Step, nil
}

// Register registers the workflow and the activity.
func (b *Bench) Register(w worker.Worker) {
	w.RegisterWorkflowWithOptions(b.Workflow, workflow.RegisterOptions{Name: WorkflowName})
	w.RegisterActivityWithOptions(b.Step, activityOptions("BaselineStep"))
}

func (b *Bench) completions() map[int]time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[int]time.Time, len(b.done))
	for k, v := range b.done {
		out[k] = v
	}
	return out
}

// Report is one baseline run's result.
type Report struct {
	Mode           string             `json:"mode"`
	Local          string             `json:"local"`
	Activities     int                `json:"activities"`
	Concurrency    int                `json:"concurrency"`
	TaskQueue      string             `json:"task_queue"`
	LoadAvgStart   string             `json:"loadavg_start"`
	LoadAvgEnd     string             `json:"loadavg_send_end"`
	WindowSeconds  float64            `json:"window_seconds"`
	Started        int                `json:"started"`
	StartErrors    int                `json:"start_errors"`
	LastError      string             `json:"last_error,omitempty"`
	StartsPerSec   float64            `json:"starts_per_sec"` // starts returned in the window / window
	StartLatency   loadgen.Summary    `json:"start_latency"`
	Completed      int                `json:"completed"`
	CompletedInWin float64            `json:"completed_per_sec_in_window"`
	CompletedAll   float64            `json:"completed_per_sec_overall"` // completed / (last completion − first start)
	LastAfterEnd   float64            `json:"last_completion_after_send_end_seconds"`
	EndToEnd       loadgen.Summary    `json:"end_to_end"` // start call → last activity
	DrainSeconds   float64            `json:"drain_seconds"`
	CPUCores       map[string]float64 `json:"cpu_cores_window"`
	CPUCoresDrain  map[string]float64 `json:"cpu_cores_drain"`
	Error          string             `json:"error,omitempty"`
}

type startRec struct {
	seq      int
	began    time.Time
	took     time.Duration
	measured bool
}

// Run runs one baseline and prints its report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	c, err := client.Dial(client.Options{
		HostPort: o.Temporal, Namespace: o.Namespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	if err != nil {
		return nil, fmt.Errorf("temporal at %s: %w", o.Temporal, err)
	}
	defer c.Close()
	run := randomID()
	if o.TaskQueue == "" {
		o.TaskQueue = "baseline-" + run
	}
	rep := &Report{Mode: o.Mode, Local: o.Local, Activities: o.Activities, Concurrency: o.Concurrency,
		TaskQueue: o.TaskQueue, LoadAvgStart: loadgen.LoadAvg()}
	if o.Mode == ModeStart {
		rep.Local, rep.Activities = "", 0
	}
	fmt.Fprintf(o.Out, "baseline %s: %d concurrent starters for %s (warm-up %s) on %s, task queue %s; load average %s\n",
		o.describe(), o.Concurrency, o.Duration, o.Warmup, o.Temporal, o.TaskQueue, rep.LoadAvgStart)

	b := NewBench()
	var w worker.Worker
	if o.Mode == ModeComplete {
		w = worker.New(c, o.TaskQueue, worker.Options{})
		b.Register(w)
		if err := w.Start(); err != nil {
			return nil, fmt.Errorf("start worker: %w", err)
		}
		defer w.Stop()
	}

	steps := o.Activities
	if o.Mode == ModeStart {
		steps = 0
	}
	pad := strings.Repeat("x", o.PayloadBytes)
	start := time.Now()
	measureFrom, end := start.Add(o.Warmup), start.Add(o.Duration)
	var (
		seq      atomic.Int64
		errCount atomic.Int64
		lastErr  atomic.Value
		recMu    sync.Mutex
		recs     []startRec
		wg       sync.WaitGroup
	)
	cpuStart := make(chan loadgen.CPUSample, 1)
	go func() {
		select {
		case <-time.After(time.Until(measureFrom)):
		case <-ctx.Done():
		}
		cpuStart <- loadgen.SampleCPU(o.CPU)
	}()
	for range o.Concurrency {
		wg.Go(func() {
			var mine []startRec
			for ctx.Err() == nil && time.Now().Before(end) {
				n := int(seq.Add(1))
				began := time.Now()
				_, err := c.ExecuteWorkflow(ctx, o.startOptions(run, n), WorkflowName,
					Input{Seq: n, Steps: steps, Local: o.Local, Pad: pad})
				took := time.Since(began)
				if err != nil {
					errCount.Add(1)
					lastErr.Store(err.Error())
					continue
				}
				mine = append(mine, startRec{seq: n, began: began, took: took, measured: !began.Before(measureFrom)})
			}
			recMu.Lock()
			recs = append(recs, mine...)
			recMu.Unlock()
		})
	}
	wg.Wait()
	cpuEnd := loadgen.SampleCPU(o.CPU)
	rep.CPUCores = loadgen.CPUUse(<-cpuStart, cpuEnd)
	rep.LoadAvgEnd = loadgen.LoadAvg()
	window := end.Sub(measureFrom).Seconds()
	rep.WindowSeconds = window
	rep.Started = len(recs)
	rep.StartErrors = int(errCount.Load())
	if e, ok := lastErr.Load().(string); ok {
		rep.LastError = e
	}
	var lat []time.Duration
	inWin := 0
	began := map[int]time.Time{}
	for _, r := range recs {
		began[r.seq] = r.began
		if r.measured {
			lat = append(lat, r.took)
			if r.began.Add(r.took).Before(end) {
				inWin++
			}
		}
	}
	rep.StartLatency = loadgen.Summarize(lat)
	rep.StartsPerSec = float64(inWin) / window

	drainStart := time.Now()
	switch o.Mode {
	case ModeComplete:
		err = waitCompletions(ctx, b, len(recs), o.DrainTimeout)
		done := b.completions()
		rep.Completed = len(done)
		var e2e []time.Duration
		var last time.Time
		completedInWin := 0
		for s, at := range done {
			if t, ok := began[s]; ok {
				e2e = append(e2e, at.Sub(t))
			}
			if at.After(last) {
				last = at
			}
			if !at.Before(measureFrom) && at.Before(end) {
				completedInWin++
			}
		}
		rep.EndToEnd = loadgen.Summarize(e2e)
		rep.CompletedInWin = float64(completedInWin) / window
		if !last.IsZero() {
			rep.CompletedAll = float64(len(done)) / last.Sub(start).Seconds()
			rep.LastAfterEnd = last.Sub(end).Seconds()
		}
	case ModeStart:
		// Not measured: complete the backlog so it does not weigh on later runs.
		err = drainStarted(ctx, c, b, o)
	}
	rep.DrainSeconds = time.Since(drainStart).Seconds()
	rep.CPUCoresDrain = loadgen.CPUUse(cpuEnd, loadgen.SampleCPU(o.CPU))
	if err != nil {
		rep.Error = err.Error()
	}
	rep.print(o.Out)
	if o.JSONPath != "" {
		if werr := loadgen.WriteJSON(o.JSONPath, rep); werr != nil && err == nil {
			err = werr
		}
	}
	return rep, err
}

func (o *Options) validate() error {
	host, _, err := net.SplitHostPort(o.Temporal)
	if err != nil {
		return fmt.Errorf("--temporal %q: %w", o.Temporal, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--temporal %q: only loopback addresses are allowed", o.Temporal)
	}
	switch o.Mode {
	case ModeStart, ModeComplete:
	default:
		return fmt.Errorf("--mode %q: want start or complete", o.Mode)
	}
	switch o.Local {
	case LocalNone, LocalDB, LocalAll:
	default:
		return fmt.Errorf("--local %q: want none, db or all", o.Local)
	}
	switch {
	case o.Concurrency < 1 || o.Concurrency > 10000:
		return fmt.Errorf("--concurrency %d: want [1, 10000]", o.Concurrency)
	case o.Duration <= 0 || o.Duration > 24*time.Hour:
		return fmt.Errorf("--duration %s: want (0, 24h]", o.Duration)
	case o.Warmup < 0 || o.Warmup >= o.Duration:
		return errors.New("--warmup must be shorter than --duration")
	case o.Activities < 1 || o.Activities > 100:
		return fmt.Errorf("--activities %d: want [1, 100]", o.Activities)
	case o.PayloadBytes < 0 || o.PayloadBytes > 1<<20:
		return fmt.Errorf("--payload-bytes %d: want [0, 1MiB]", o.PayloadBytes)
	case o.DrainTimeout <= 0:
		return errors.New("--drain-timeout must be positive")
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return nil
}

func (o *Options) describe() string {
	if o.Mode == ModeStart {
		return "start (no worker)"
	}
	return fmt.Sprintf("complete (%d activities, local=%s)", o.Activities, o.Local)
}

// Search attributes, as mailhook sets them (internal/acceptance).
var (
	providerKey  = temporal.NewSearchAttributeKeyKeyword("Provider")
	eventTypeKey = temporal.NewSearchAttributeKeyKeyword("EventType")
	messageIDKey = temporal.NewSearchAttributeKeyKeyword("MessageID")
)

// startOptions mirror start.Options: the same reuse policy, error on a taken ID, three keyword
// search attributes and a static summary.
func (o *Options) startOptions(run string, n int) client.StartWorkflowOptions {
	msg := fmt.Sprintf("msg_baseline_%s_%d", run, n)
	so := client.StartWorkflowOptions{
		ID:                                       fmt.Sprintf("baseline:%s-%d", run, n),
		TaskQueue:                                o.TaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}
	if o.SearchAttributes {
		so.TypedSearchAttributes = temporal.NewSearchAttributes(
			providerKey.ValueSet("baseline"), eventTypeKey.ValueSet("email.delivered"), messageIDKey.ValueSet(msg))
		so.StaticSummary = "baseline email.delivered for " + msg
	}
	return so
}

// waitCompletions waits until n workflows recorded their completion.
func waitCompletions(ctx context.Context, b *Bench, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		b.mu.Lock()
		got := len(b.done)
		b.mu.Unlock()
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d workflows completed after %s", got, n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// drainStarted runs a worker until the start-mode workflows (which have no steps) are closed.
func drainStarted(ctx context.Context, c client.Client, b *Bench, o Options) error {
	w := worker.New(c, o.TaskQueue, worker.Options{})
	b.Register(w)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start drain worker: %w", err)
	}
	defer w.Stop()
	deadline := time.Now().Add(o.DrainTimeout)
	query := fmt.Sprintf("TaskQueue = '%s' AND ExecutionStatus = 'Running'", o.TaskQueue)
	for {
		resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: o.Namespace, Query: query})
		if err == nil && resp.GetCount() == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%d still running", resp.GetCount())
			}
			return fmt.Errorf("drain after %s: %w", o.DrainTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (r *Report) print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("  window %.1fs; load average %s at start, %s at send end", r.WindowSeconds, r.LoadAvgStart, r.LoadAvgEnd)
	p("  started %d (%d errors%s); %.1f starts/s in the window; start latency %s",
		r.Started, r.StartErrors, lastErr(r.LastError), r.StartsPerSec, r.StartLatency)
	if r.Mode == ModeComplete {
		p("  completed %d; %.1f/s within the window, %.1f/s overall (first start → last completion); last %.1fs after the send phase",
			r.Completed, r.CompletedInWin, r.CompletedAll, r.LastAfterEnd)
		p("  end to end (start call → last activity): %s", r.EndToEnd)
	}
	p("  drain %.1fs", r.DrainSeconds)
	if len(r.CPUCores) > 0 {
		p("  CPU (cores busy) in the window: %s; drain: %s", fmtCPU(r.CPUCores), fmtCPU(r.CPUCoresDrain))
	}
	if r.Error != "" {
		p("  error: %s", r.Error)
	}
}

func lastErr(s string) string {
	if s == "" {
		return ""
	}
	return "; last: " + s
}

func fmtCPU(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%.2f", k, m[k]))
	}
	return strings.Join(parts, " ")
}
