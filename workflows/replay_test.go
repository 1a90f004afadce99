package workflows_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/workflows"
)

// TestReplayRecordedHistories replays every history recorded from a real run (see
// `make record-histories`) against the current workflow code. A change that would break a
// workflow already running in production — a reordered, added or removed activity without
// workflow.GetVersion — fails here with a non-determinism error instead of at deploy time.
func TestReplayRecordedHistories(t *testing.T) {
	// One folder per recording: a versioned change adds a folder and keeps the old ones, so
	// histories of every earlier code version keep replaying.
	var files []string
	err := filepath.WalkDir("testdata/histories", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 9 {
		t.Fatalf("found %d recorded histories under testdata/histories, want at least the 9 scenarios", len(files))
	}
	replayer := worker.NewWorkflowReplayer()
	(&workflows.Processor{Notify: policy}).Register(replayer)
	for _, f := range files {
		name, _ := filepath.Rel("testdata/histories", f)
		t.Run(name, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}

// TestReplayOldRunThatSuppressesOnNewActivityCode is the case workflow.GetVersion
// ("suppression-notify") exists for. A run recorded on the code before suppressions — here the
// initial notify-gave-up history, a complaint — is edited as it could look after a deploy: the
// HTTP side already routed suppression sinks into its input and its ApplyStatus ran on the new
// activity code and reported suppressed, while its workflow task ran on the old code and
// scheduled only the status Notify. Replaying it on the current code must not add the
// suppression.added Notify; without GetVersion it would, and fail with a non-determinism error.
func TestReplayOldRunThatSuppressesOnNewActivityCode(t *testing.T) {
	f, err := os.Open("testdata/histories/2026-11-29-initial/notify-gave-up.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scheduled := map[int64]string{}
	edited := 0
	for _, ev := range hist.GetEvents() {
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			editPayload(t, a.GetInput().GetPayloads()[0], "suppression_sinks", []string{"app"})
			edited++
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] == activities.ApplyStatusName {
			editPayload(t, a.GetResult().GetPayloads()[0], "suppressed", true)
			edited++
		}
	}
	if edited != 2 {
		t.Fatalf("edited %d payloads, want the input and the ApplyStatus result", edited)
	}
	replayer := worker.NewWorkflowReplayer()
	(&workflows.Processor{Notify: policy}).Register(replayer)
	if err := replayer.ReplayWorkflowHistory(nil, hist); err != nil {
		t.Fatalf("replay: %v", err)
	}
}

// editPayload sets key in a JSON payload's object.
func editPayload(t *testing.T, p *commonpb.Payload, key string, value any) {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(p.GetData(), &obj); err != nil {
		t.Fatal(err)
	}
	obj[key] = value
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	p.Data = data
}

// TestReplayRunThatMarksItsSendsWithTheEvent replays a run recorded after first attempts began
// leaving their delivered notifications for MarkProcessed to mark (NotifyResult.Unmarked): the
// status change was delivered by its first attempt, its suppression.added retried as a regular
// activity. The same history with that field taken out of every result, as the code before
// recorded it, replays too: the field changes what MarkProcessed is given, never which commands
// the run gives, so the change needs no workflow.GetVersion (whose marker and search-attribute
// upsert every run would pay for).
func TestReplayRunThatMarksItsSendsWithTheEvent(t *testing.T) {
	const file = "testdata/histories/2026-12-06-0f8f8e1/sibling-retried.json"
	for _, withField := range []bool{true, false} {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		unmarked := 0
		for _, ev := range hist.GetEvents() {
			a := ev.GetMarkerRecordedEventAttributes()
			if a == nil {
				continue
			}
			for _, p := range a.GetDetails()["result"].GetPayloads() {
				var obj map[string]any
				if json.Unmarshal(p.GetData(), &obj) != nil || obj["unmarked"] != true {
					continue
				}
				unmarked++
				if !withField {
					delete(obj, "unmarked")
					data, err := json.Marshal(obj)
					if err != nil {
						t.Fatal(err)
					}
					p.Data = data
				}
			}
		}
		if unmarked != 1 {
			t.Fatalf("%s: %d first attempts left their notification unmarked, want the status change's", file, unmarked)
		}
		replayer := worker.NewWorkflowReplayer()
		(&workflows.Processor{Notify: policy}).Register(replayer)
		if err := replayer.ReplayWorkflowHistory(nil, hist); err != nil {
			t.Fatalf("replay (unmarked field kept: %v): %v", withField, err)
		}
	}
}
