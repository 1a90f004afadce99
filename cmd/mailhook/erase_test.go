package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
	"github.com/mailhook/mailhook/workflows"
)

const testErasureKey = "dGhlLWNsaS10ZXN0cy1lcmFzdXJlLWtleS0zMi1ieXRlcyE=" // 35 bytes

// eraseWorker runs, until the test ends, a worker of the default task queue on the dev server,
// as `mailhook serve` would, with the store of dbURL under the test key: the erasures the
// command starts run there.
func eraseWorker(t *testing.T, srv *testenv.DevServer, dbURL string) {
	t.Helper()
	cfg := config.Defaults()
	cfg.Erasure.HashKey = testErasureKey
	opts, err := serve.StoreOptions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), dbURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	w := worker.New(srv.Client(), cfg.Temporal.TaskQueue, worker.Options{DeadlockDetectionTimeout: testenv.DeadlockDetectionTimeout})
	workflows.NewProcessor(cfg).Register(w)
	(&activities.Erasure{Store: st.Erasures}).Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

// eraseEnv points the command at a fresh database and a dev server of its own.
func eraseEnv(t *testing.T) (dbURL string, srv *testenv.DevServer) {
	t.Helper()
	srv = testenv.StartTemporal(t, testenv.DevServerOptions{})
	dbURL = storetest.NewDatabase(t)
	t.Setenv("MAILHOOK_CONFIG", "")
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("TEMPORAL_ADDRESS", srv.FrontendHostPort())
	return dbURL, srv
}

// mailhook erase: refused (exit 2) without a key or without a reason; with both it erases, and
// a second run finds nothing left. The address read from stdin stays off the command line.
func TestEraseCommand(t *testing.T) {
	dbURL, srv := eraseEnv(t)
	eraseWorker(t, srv, dbURL)
	run := func(stdin string, args ...string) (string, error) {
		var out strings.Builder
		c := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
		c.SetArgs(append([]string{"erase"}, args...))
		c.SetIn(strings.NewReader(stdin))
		c.SetOut(&out)
		c.SetErr(io.Discard)
		err := c.Execute()
		return out.String(), err
	}

	t.Setenv(config.EnvErasureKey, "")
	if _, err := run("", "--address", "jane@example.com", "--reason", "art. 17"); exitCode(err) != exitUsage || !strings.Contains(fmt.Sprint(err), "erasure.hash_key") {
		t.Fatalf("erase without a key: %v (exit %d), want exit %d naming erasure.hash_key", err, exitCode(err), exitUsage)
	}
	t.Setenv(config.EnvErasureKey, testErasureKey)
	for _, args := range [][]string{{"--address", "jane@example.com"}, {"--reason", "x"}, {"--address", "example.com", "--reason", "x"}} {
		if _, err := run("", args...); exitCode(err) != exitUsage {
			t.Errorf("erase %v: %v (exit %d), want %d", args, err, exitCode(err), exitUsage)
		}
	}

	// The key the command erases under, so the store finds the erased address's hashed row.
	h, _ := serve.ErasureHasher(config.Erasure{HashKey: testErasureKey})
	st, err := store.Open(t.Context(), dbURL, store.Options{ErasureHasher: h})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db := storetest.NewPool(t, dbURL) // the test's own queries
	ev := domain.Event{Provider: "postscale", EventID: "evt_cli", Type: "email.bounced", Kind: domain.KindStatus, Status: domain.StatusBounced,
		BounceType: domain.BounceHard, MessageID: "msg_cli", Recipient: "Jane@Example.com", OccurredAt: time.Now(),
		Raw: json.RawMessage(`{"to":"Jane@Example.com"}`)}
	if _, err := st.Events.RecordEvent(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Events.ApplyStatus(t.Context(), ev, apply.Rules{}); err != nil {
		t.Fatal(err)
	}

	out, err := run("jane@example.com\n", "--address", "-", "--reason", "ticket 12")
	if err != nil || !strings.Contains(out, "suppressions         1") || !strings.Contains(out, erasure.HashPrefix) || strings.Contains(out, "jane@") {
		t.Fatalf("erase: %v\n%s", err, out)
	}
	hits, err := storetest.Hits(t.Context(), db, "jane@example.com")
	if err != nil || len(hits) != 0 {
		t.Fatalf("after erase, the address is still in %v (%v)", hits, err)
	}
	out, err = run("", "--address", "JANE@example.com", "--reason", "again", "--format", "json")
	var e store.Erasure
	if err != nil || json.Unmarshal([]byte(out), &e) != nil || e.Total != 0 || e.ErasedBy == "" {
		t.Fatalf("erase again: %v\n%s", err, out)
	}
	if check, err := st.Suppressions.CheckSuppression(t.Context(), "jane@example.com", ""); err != nil || !check.Suppressed {
		t.Fatalf("the erased address is not suppressed any more: %+v %v", check, err)
	}
}

// mailhook erase of a mailbox customers wrote to: refused (exit 2, nothing changed, saying how
// many inbound emails), shown by --dry-run, and done by --scope inbound.
func TestEraseCommandGuardsASharedInboundAddress(t *testing.T) {
	dbURL, srv := eraseEnv(t)
	eraseWorker(t, srv, dbURL)
	t.Setenv(config.EnvErasureKey, testErasureKey)
	run := func(args ...string) (string, error) {
		var out strings.Builder
		c := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
		c.SetArgs(append([]string{"erase", "--address", "support@app.example", "--reason", "mailbox closed"}, args...))
		c.SetOut(&out)
		c.SetErr(io.Discard)
		err := c.Execute()
		return out.String(), err
	}
	st, err := store.Open(t.Context(), dbURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db := storetest.NewPool(t, dbURL) // the test's own queries
	for _, from := range []string{"ann@example.com", "bob@example.com"} {
		ev := domain.Event{Provider: "postscale", EventID: "email.received:" + from, Type: "email.received", Kind: domain.KindInbound,
			MessageID: "in_" + from, Recipient: "support@app.example", OccurredAt: time.Now(),
			Raw: json.RawMessage(fmt.Sprintf(`{"from":%q,"to":"support@app.example","text":"help"}`, from))}
		if _, err := st.Events.RecordEvent(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := run(); exitCode(err) != exitUsage || !strings.Contains(fmt.Sprint(err), "2 inbound emails") {
		t.Fatalf("erase of a shared mailbox: %v (exit %d), want exit %d saying 2 inbound emails", err, exitCode(err), exitUsage)
	}
	out, err := run("--dry-run")
	if err != nil || !strings.Contains(out, "event_payloads       2") || !strings.Contains(out, "Dry run") {
		t.Fatalf("--dry-run: %v\n%s", err, out)
	}
	if hits, err := storetest.Hits(t.Context(), db, "support@app.example"); err != nil || len(hits) == 0 {
		t.Fatalf("after a refusal and a dry run the emails must still be there: %v %v", hits, err)
	}
	out, err = run("--scope", "inbound")
	if err != nil || !strings.Contains(out, "scope inbound") {
		t.Fatalf("--scope inbound: %v\n%s", err, out)
	}
	if hits, err := storetest.Hits(t.Context(), db, "support@app.example"); err != nil || len(hits) != 0 {
		t.Fatalf("after --scope inbound the address is still in %v (%v)", hits, err)
	}
}

// A running erasure says where it is on stderr while the command waits for it (issue 25).
func TestEraseShowsItsProgressWhileItRuns(t *testing.T) {
	dbURL := storetest.NewDatabase(t)
	h, _ := serve.ErasureHasher(config.Erasure{HashKey: testErasureKey})
	st, err := store.Open(t.Context(), dbURL, store.Options{ErasureHasher: h})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Started and not run: the job stays running while the printer looks at it.
	job, err := st.Erasures.StartErasure(t.Context(), store.ErasureRequest{Address: "jane@example.com", ErasedBy: "test", Reason: "art. 17"})
	if err != nil {
		t.Fatal(err)
	}
	old := progressEvery
	progressEvery = 10 * time.Millisecond
	t.Cleanup(func() { progressEvery = old })
	var out testenv.Buffer
	stop := showProgress(t.Context(), st, job.ID, &out)
	testenv.WaitUntil(t, "a progress line", testenv.Stall, func() bool { return strings.Contains(out.String(), "erasing (job ") })
	stop()
	if line := out.String(); !strings.Contains(line, "phases done") || strings.Contains(line, "jane@") {
		t.Fatalf("progress %q: want phases and counts, never the address", line)
	}
	if _, err := st.Erasures.FinishErasure(t.Context(), job.ID, store.ErasureDone); err != nil {
		t.Fatal(err)
	}
}

// Without a worker, mailhook erase fails once --worker-wait is over, saying so and naming the
// task queue; the job waits, and runs to its end when a worker starts (asked again, the command
// joins it).
func TestEraseCommandWithoutAWorker(t *testing.T) {
	dbURL, srv := eraseEnv(t)
	t.Setenv(config.EnvErasureKey, testErasureKey)
	run := func(args ...string) (string, string, error) {
		var out, errOut strings.Builder
		c := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
		c.SetArgs(append([]string{"erase", "--address", "jane@example.com", "--reason", "art. 17"}, args...))
		c.SetOut(&out)
		c.SetErr(&errOut)
		err := c.Execute()
		return out.String(), errOut.String(), err
	}
	_, stderr, err := run("--worker-wait", "2s")
	if err == nil || !strings.Contains(err.Error(), "no worker polls task queue \"mailhook\"") || !strings.Contains(stderr, "workflow erasure:1") {
		t.Fatalf("erase without a worker: %v\n%s", err, stderr)
	}
	st, err := store.Open(t.Context(), dbURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if job, err := st.Erasures.ErasureJob(t.Context(), 1); err != nil || job.Status != domain.ErasureRunning {
		t.Fatalf("the job after the command gave up: %+v %v, want it running", job, err)
	}
	eraseWorker(t, srv, dbURL)
	out, _, err := run("--format", "json")
	var e store.Erasure
	if err != nil || json.Unmarshal([]byte(out), &e) != nil || e.JobID != 1 || e.ID == 0 {
		t.Fatalf("erase once a worker runs: %v\n%s", err, out)
	}
}
