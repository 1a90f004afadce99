package loadgen

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/provider/providertest"
)

func TestPercentile(t *testing.T) {
	var v []time.Duration
	for i := 1; i <= 100; i++ {
		v = append(v, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {95, 95 * time.Millisecond}, {99, 99 * time.Millisecond}, {99.9, 100 * time.Millisecond},
		{100, 100 * time.Millisecond}, {1, time.Millisecond}, {0.5, time.Millisecond}, {0, time.Millisecond}} {
		if got := Percentile(v, c.p); got != c.want {
			t.Errorf("p%v = %s, want %s", c.p, got, c.want)
		}
	}
	if Percentile(nil, 99) != 0 {
		t.Error("empty")
	}
	one := []time.Duration{7}
	if Percentile(one, 50) != 7 || Percentile(one, 99) != 7 {
		t.Error("single value")
	}
	// Nearest rank on 10 values: p95 and p99 are the largest.
	ten := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if Percentile(ten, 90) != 9 || Percentile(ten, 95) != 10 || Percentile(ten, 50) != 5 {
		t.Errorf("ten: p50 %v p90 %v p95 %v", Percentile(ten, 50), Percentile(ten, 90), Percentile(ten, 95))
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]time.Duration{5, 1, 4, 2, 3})
	if s.Count != 5 || s.P50 != 3 || s.Max != 5 || s.Mean != 3 || s.P99 != 5 {
		t.Fatalf("%+v", s)
	}
	if Summarize(nil) != (Summary{}) {
		t.Fatal("empty")
	}
	var l Latencies
	l.Add("a", time.Millisecond)
	l.Add("b", 3*time.Millisecond)
	l.Add("a", 2*time.Millisecond)
	got := l.Summaries("a", "b")
	if got["a"].Count != 2 || got["all"].Count != 3 || got["all"].Max != 3*time.Millisecond {
		t.Fatalf("%+v", got)
	}
}

func TestParseCPUTargets(t *testing.T) {
	got, err := ParseCPUTargets([]string{"temporal=12", "pg=3+4,5"})
	if err != nil || len(got) != 2 || got[1].Label != "pg" || len(got[1].PIDs) != 3 || got[0].PIDs[0] != 12 {
		t.Fatalf("%+v %v", got, err)
	}
	me, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	u, err := ParseCPUTargets([]string{"db=user:" + me.Username})
	if err != nil || u[0].User != me.Username {
		t.Fatalf("%+v %v", u, err)
	}
	tr, err := ParseCPUTargets([]string{"pg=tree:77"})
	if err != nil || tr[0].Tree != 77 || len(tr[0].PIDs) != 0 {
		t.Fatalf("%+v %v", tr, err)
	}
	for _, bad := range []string{"x", "=1", "a=", "a=b", "a=-1", "a=user:no-such-user-here", "a=tree:", "a=tree:x", "a=tree:0"} {
		if _, err := ParseCPUTargets([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A tree target is a process and its descendants: a child started here is in this process's
// tree, and this process is not in the child's.
func TestTreePIDs(t *testing.T) {
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	if got := treePIDs(os.Getpid()); !slices.Contains(got, os.Getpid()) || !slices.Contains(got, child.Process.Pid) {
		t.Errorf("tree of %d = %v, want it and its child %d", os.Getpid(), got, child.Process.Pid)
	}
	if got := treePIDs(child.Process.Pid); !slices.Equal(got, []int{child.Process.Pid}) {
		t.Errorf("tree of the child %d = %v, want only it", child.Process.Pid, got)
	}
	s := SampleCPU([]CPUTarget{{Label: "tree", Tree: os.Getpid()}})
	if _, ok := s.CPU["tree"][os.Getpid()]; !ok {
		t.Errorf("sample of the tree %v lacks this process", s.CPU["tree"])
	}
}

func TestProcReaders(t *testing.T) {
	// Burn CPU until this process has used some: on a starved machine 50 ms of wall time can
	// be less than one clock tick of CPU, so the loop waits for CPU progress, not for time.
	for ProcCPU(0) < 20*time.Millisecond {
	}
	if ProcCPU(0) <= 0 {
		t.Error("no CPU time for this process")
	}
	hwm, rss, err := ProcMemory(os.Getpid())
	if err != nil || rss <= 0 || hwm < rss {
		t.Errorf("hwm %d rss %d err %v", hwm, rss, err)
	}
	targets := []CPUTarget{{Label: "me", PIDs: []int{os.Getpid()}}}
	if me, err := user.Current(); err == nil {
		targets = append(targets, CPUTarget{Label: "mine", User: me.Username})
	}
	s1 := SampleCPU(targets)
	// The machine's counters (/proc/stat) and a process's line in /proc/<pid>/stat move by whole
	// clock ticks, later than this process's own clock: a quiet machine once showed no machine
	// CPU over 20 ms this process spent, and once no tick on this process's line. Burn on until
	// both move, up to 2 s of this process's CPU.
	pid := os.Getpid()
	var s2 CPUSample
	var u map[string]float64
	for step := 1; ; step++ {
		for ProcCPU(0) < s1.CPU["self"][0]+time.Duration(step)*20*time.Millisecond {
		}
		s2 = SampleCPU(targets)
		u = CPUUse(s1, s2)
		mineMoved := len(targets) == 1 || s2.CPU["mine"][pid] > s1.CPU["mine"][pid]
		if (u["machine"] > 0 && mineMoved) || step == 100 {
			break
		}
	}
	if u["me"] <= 0 || u["self"] <= 0 || u["machine"] <= 0 {
		t.Errorf("%v", u)
	}
	if secs := CPUSeconds(s1, s2); secs["me"] <= 0 || secs["me"] > s2.At.Sub(s1.At).Seconds()*float64(runtime.NumCPU())+0.02 {
		t.Errorf("CPU seconds %v over %s", secs, s2.At.Sub(s1.At))
	}
	// A user's processes include this one, which is what is checked: the user's total depends on
	// whatever else that user runs on a shared machine, where processes exiting between the
	// listing and the reading made it negative (-9.3 cores while other builds ran).
	if len(targets) > 1 {
		if _, ok := s2.CPU["mine"][pid]; !ok {
			t.Errorf("the user's processes do not include this one (pid %d): %d pids", pid, len(s2.CPU["mine"]))
		} else if s2.CPU["mine"][pid] <= s1.CPU["mine"][pid] {
			t.Errorf("this process used no CPU time as one of the user's processes: %s then %s", s1.CPU["mine"][pid], s2.CPU["mine"][pid])
		}
	}
}

func TestParseTemporalOps(t *testing.T) {
	text := `# HELP temporal_request temporal_request counter
# TYPE temporal_request counter
temporal_request{namespace="default",operation="StartWorkflowExecution",task_queue="_unknown_"} 120
temporal_request{namespace="default",operation="PollWorkflowTaskQueue",task_queue="q"} 7
temporal_request{namespace="default",nexus_operation="x",operation="StartWorkflowExecution"} 3
temporal_request_latency_bucket{operation="StartWorkflowExecution",le="0.1"} 99
temporal_request_failure{namespace="default",operation="StartWorkflowExecution"} 40
`
	samples, err := parseExposition(bufio.NewScanner(strings.NewReader(text)))
	got := temporalOps(samples)
	if err != nil {
		t.Fatal(err)
	}
	if got["StartWorkflowExecution"] != 123 || got["PollWorkflowTaskQueue"] != 7 || len(got) != 2 {
		t.Fatalf("%v", got)
	}
	d := diffOps(map[string]float64{"StartWorkflowExecution": 100, "X": 1}, got)
	if d["StartWorkflowExecution"] != 23 || d["PollWorkflowTaskQueue"] != 7 || len(d) != 2 {
		t.Fatalf("%v", d)
	}
	if !workerOp("PollActivityTaskQueue") || !workerOp("RespondWorkflowTaskCompleted") || workerOp("StartWorkflowExecution") {
		t.Error("workerOp")
	}
}

// The HTTP process's starts and a worker's task completions add up; a process that does not
// answer fails the count rather than leaving it partial.
func TestScrapeTemporalOpsAllAddsProcesses(t *testing.T) {
	serve := func(body string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }))
		t.Cleanup(srv.Close)
		return srv
	}
	httpSide := serve(`temporal_request{operation="StartWorkflowExecution"} 10` + "\n")
	worker := serve(`temporal_request{operation="RespondWorkflowTaskCompleted"} 9` + "\n" + `temporal_request{operation="StartWorkflowExecution"} 1` + "\n")
	got, err := scrapeTemporalOpsAll(context.Background(), http.DefaultClient, []string{httpSide.URL, worker.URL})
	if err != nil || got["StartWorkflowExecution"] != 11 || got["RespondWorkflowTaskCompleted"] != 9 {
		t.Fatalf("%v %v", got, err)
	}
	gone := serve("")
	gone.Close()
	if _, err := scrapeTemporalOpsAll(context.Background(), http.DefaultClient, []string{httpSide.URL, gone.URL}); err == nil {
		t.Error("a process that does not answer was counted as none")
	}
}

func TestCheckVersions(t *testing.T) {
	m := apiMessage{Status: "bounced", Version: 2}
	ok := []Notification{{Version: 1, Status: "delivered"}, {Version: 2, Status: "bounced"}}
	if d := checkVersions(m, ok); d != "" {
		t.Fatal(d)
	}
	for name, ns := range map[string][]Notification{
		"missing":      {{Version: 2, Status: "bounced"}},
		"twice":        {{Version: 1}, {Version: 1}, {Version: 2, Status: "bounced"}},
		"wrong status": {{Version: 1}, {Version: 2, Status: "delivered"}},
		"gap":          {{Version: 2, Status: "bounced"}, {Version: 3}},
	} {
		if checkVersions(m, ns) == "" {
			t.Errorf("%s: not detected", name)
		}
	}
	if d := checkVersions(apiMessage{}, nil); d != "" {
		t.Fatal(d)
	}
}

func TestCompareMessage(t *testing.T) {
	want := Expected{Status: "bounced", BounceType: "hard", Opens: 1, History: 2}
	m := apiMessage{Status: "bounced", BounceType: "hard", Opens: 1}
	m.Events = append(m.Events, struct {
		EventID string `json:"event_id"`
		Outcome string `json:"outcome"`
	}{EventID: "a"}, struct {
		EventID string `json:"event_id"`
		Outcome string `json:"outcome"`
	}{EventID: "b"})
	if d := compareMessage(want, m); d != "" {
		t.Fatal(d)
	}
	m.Status = "delivered"
	m.Events[1].EventID = "a"
	d := compareMessage(want, m)
	if !strings.Contains(d, "status") || !strings.Contains(d, "twice") || !strings.Contains(d, "history") {
		t.Fatal(d)
	}
}

func TestParseMix(t *testing.T) {
	m, err := parseMix("postscale=3, sendgrid=1")
	if err != nil || m[Postscale] != 3 || m[SendGrid] != 1 {
		t.Fatal(m, err)
	}
	for _, bad := range []string{"mailgun=1", "postscale", "postscale=-1", "postscale=x"} {
		if _, err := parseMix(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSendGridKeyRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sg.pem")
	pub, err := GenerateSendGridKey(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := GenerateSendGridKey(path, false); err == nil {
		t.Fatal("overwrote an existing key without --force")
	}
	k, err := LoadSendGridKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if providertest.SendGridPublicKey(&k.PublicKey) != pub {
		t.Fatal("loaded key does not match the printed public key")
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	bad := filepath.Join(t.TempDir(), "bad")
	_ = os.WriteFile(bad, []byte("not a key"), 0o600)
	if _, err := LoadSendGridKey(bad); err == nil {
		t.Fatal("garbage accepted")
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:9100", "[::1]:80", "localhost:1"} {
		if err := requireLoopbackHostPort(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0:9100", "10.0.0.1:80", "example.com:80", ":9100"} {
		if err := requireLoopbackHostPort(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	o := Options{URL: "http://192.0.2.1:8000", Weights: map[string]int{Postscale: 1}, PostscaleSecret: "x", Duration: time.Second, DrainTimeout: time.Second, Concurrency: 1}
	if err := o.validate(); err == nil {
		t.Error("non-loopback --url accepted")
	}
}

func signedSendGridHeader(key *ecdsa.PrivateKey, body []byte, now time.Time) http.Header {
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	providertest.SignSendGrid(req, key, body, now)
	return req.Header
}

func TestMeanBy(t *testing.T) {
	parse := func(s string) []promSample {
		out, err := parseExposition(bufio.NewScanner(strings.NewReader(s)))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := parse(`mailhook_webhook_request_duration_seconds_sum{endpoint="postscale",outcome="accepted"} 10
mailhook_webhook_request_duration_seconds_count{endpoint="postscale",outcome="accepted"} 100
temporal_request_latency_seconds_sum{operation="StartWorkflowExecution"} 5
temporal_request_latency_seconds_count{operation="StartWorkflowExecution"} 100
`)
	after := parse(`mailhook_webhook_request_duration_seconds_sum{endpoint="postscale",outcome="accepted"} 30
mailhook_webhook_request_duration_seconds_count{endpoint="postscale",outcome="accepted"} 200
mailhook_webhook_request_duration_seconds_sum{endpoint="sendgrid",outcome="accepted"} 4
mailhook_webhook_request_duration_seconds_count{endpoint="sendgrid",outcome="accepted"} 2
temporal_request_latency_seconds_sum{operation="StartWorkflowExecution"} 20
temporal_request_latency_seconds_count{operation="StartWorkflowExecution"} 200
temporal_request_latency_seconds_sum{operation="PollWorkflowTaskQueue"} 2000
temporal_request_latency_seconds_count{operation="PollWorkflowTaskQueue"} 1
untyped_metric 3
`)
	got := serverLatency(before, after)
	want := map[string]time.Duration{
		"handler postscale/accepted": 200 * time.Millisecond, // 20 s over 100 requests
		"handler sendgrid/accepted":  2 * time.Second,
		"sdk StartWorkflowExecution": 150 * time.Millisecond,
	}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for k, v := range want {
		if d := got[k] - v; d > time.Microsecond || d < -time.Microsecond {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
}

// A process that exited between two samples is lost and a reused pid counts from its start;
// neither may make a target's use negative (seen under load: -9.3 cores).
func TestCPUUseNeverCountsAnExitedProcessAsNegative(t *testing.T) {
	t0 := time.Unix(0, 0)
	from := CPUSample{At: t0, CPU: map[string]map[int]time.Duration{"user": {1: 10 * time.Second, 2: 50 * time.Second, 3: 40 * time.Second}}}
	to := CPUSample{At: t0.Add(10 * time.Second), CPU: map[string]map[int]time.Duration{"user": {
		1: 15 * time.Second, // used 5 s
		// 2 exited: lost
		3: 2 * time.Second, // reused by a process that has used 2 s
		4: 3 * time.Second, // new: 3 s
	}}}
	if got := CPUUse(from, to)["user"]; got != 1.0 {
		t.Fatalf("user used %.2f cores, want 1.00 ((5+2+3) s over 10 s)", got)
	}
}
