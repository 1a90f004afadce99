package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// mailhook reconcile run runs the daily reconciliation through its schedule, on a worker started
// as `mailhook worker` starts (which creates the schedule): yesterday by default, a past day
// with --date, and prints the run's result. A day not over yet is refused (exit 2).
func TestReconcileRunRunsTheSchedule(t *testing.T) {
	srv := testenv.StartTemporal(t, testenv.DevServerOptions{})
	t.Setenv("MAILHOOK_CONFIG", "")
	t.Setenv("DATABASE_URL", storetest.NewDatabase(t))
	t.Setenv("TEMPORAL_ADDRESS", srv.FrontendHostPort())

	today := time.Now().UTC().Format(time.DateOnly)
	if _, err := runCLI(t, "", "reconcile", "run", "--date", today); exitCode(err) != exitUsage {
		t.Errorf("reconcile run --date today: %v, want exit %d", err, exitUsage)
	}

	cfg, err := serve.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve.Run(ctx, cfg, serve.Mode{Worker: true}, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() { cancel(); <-done })

	// The worker creates the schedule as it starts: until then the command fails (exit 1).
	var out string
	testenv.WaitFor(t, "a reconcile run through the schedule", testenv.Stall, func() (int64, bool, error) {
		out, err = runCLI(t, "", "reconcile", "run", "--date", "2026-11-30", "--format", "json", "--wait", "2m")
		return 0, err == nil, nil
	})
	var res struct {
		Date   string `json:"date"`
		Totals struct {
			Received *int64 `json:"received"`
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Date != "2026-11-30" || res.Totals.Received == nil {
		t.Fatalf("reconcile run --date 2026-11-30: %v\n%s", err, out)
	}

	out, err = runCLI(t, "", "reconcile", "run", "--wait", "2m")
	yesterday := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)
	if err != nil || !strings.Contains(out, "day "+yesterday+": 0 events received") {
		t.Fatalf("reconcile run: %v\n%s", err, out)
	}
}
