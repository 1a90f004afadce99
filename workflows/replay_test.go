package workflows_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/worker"

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
