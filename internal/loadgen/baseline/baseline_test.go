package baseline

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func TestStepsMirrorProcessWebhookEvent(t *testing.T) {
	got := []string{}
	for i := range 4 {
		got = append(got, stepName(i, 4))
	}
	want := []string{"RecordEvent", "ApplyStatus", "Notify", "MarkProcessed"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("steps %v, want %v", got, want)
		}
	}
	if stepName(0, 3) != "RecordEvent" || stepName(1, 3) != "Notify" || stepName(2, 3) != "MarkProcessed" {
		t.Fatal("3 steps")
	}
	for i := range 4 {
		if isLocal(LocalNone, i, 4) || !isLocal(LocalAll, i, 4) {
			t.Fatal("none/all")
		}
		if isLocal(LocalDB, i, 4) == (stepName(i, 4) == "Notify") {
			t.Fatalf("db: step %s local=%v", stepName(i, 4), isLocal(LocalDB, i, 4))
		}
	}
}

func TestWorkflowRunsEveryStepAndRecordsCompletion(t *testing.T) {
	for _, local := range []string{LocalNone, LocalDB, LocalAll} {
		t.Run(local, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			// The SDK's 1 s deadlock detector fails a workflow task starved of CPU.
			env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 30 * time.Second})
			b := NewBench()
			env.RegisterWorkflowWithOptions(b.Workflow, workflow.RegisterOptions{Name: WorkflowName})
			env.RegisterActivityWithOptions(b.Step, activityOptions("BaselineStep"))
			regular, locals := 0, 0
			env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { regular++ })
			env.SetOnLocalActivityStartedListener(func(*activity.Info, context.Context, []any) { locals++ })
			env.ExecuteWorkflow(WorkflowName, Input{Seq: 42, Steps: 4, Local: local, Pad: "xxxx"})
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
			}
			wantLocal := map[string]int{LocalNone: 0, LocalDB: 3, LocalAll: 4}[local]
			if locals != wantLocal || regular != 4-wantLocal {
				t.Fatalf("%d local + %d regular activities, want %d local", locals, regular, wantLocal)
			}
			if at, ok := b.completions()[42]; !ok || at.After(time.Now()) {
				t.Fatal("completion not recorded")
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := Options{Temporal: "127.0.0.1:7233", Mode: ModeStart, Local: LocalNone, Concurrency: 50, Duration: time.Second, Activities: 4, DrainTimeout: time.Second}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Options){
		"remote":  func(o *Options) { o.Temporal = "10.1.2.3:7233" },
		"mode":    func(o *Options) { o.Mode = "x" },
		"local":   func(o *Options) { o.Local = "some" },
		"warmup":  func(o *Options) { o.Warmup = time.Minute },
		"workers": func(o *Options) { o.Concurrency = 0 },
	} {
		o := ok
		mut(&o)
		if o.validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
