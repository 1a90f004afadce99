package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
)

// SuppressionCheckOptions configure `mailhook-loadtest suppression-check`.
type SuppressionCheckOptions struct {
	URL, Token, DatabaseURL string
	// Fill is how many generated suppressions the table must hold (added when missing).
	Fill int
	// Rate is the open-loop request rate; Duration the measured window after Warmup.
	Rate             float64
	Duration, Warmup time.Duration
	// HitShare is the share of checks whose answer is "suppressed".
	HitShare    float64
	MaxInflight int
	Seed        int64
	CPU         []CPUTarget
	JSONPath    string
	Out         io.Writer
}

// SuppressionCheckReport is what one run measured. Latency runs from the moment the open loop
// meant to send a request, so a stall of the sender or the server counts in full rather than
// delaying the requests behind it out of the measurement.
type SuppressionCheckReport struct {
	Rows        int64              `json:"rows"`
	FillSeconds float64            `json:"fill_seconds,omitempty"`
	Rate        float64            `json:"target_rate"`
	Window      string             `json:"window"`
	Sent        int                `json:"sent"`
	Answered    int                `json:"answered"`
	Achieved    float64            `json:"achieved_rate"`
	Hits        int                `json:"hits"`
	Misses      int                `json:"misses"`
	Latency     Summary            `json:"latency"`
	Errors      map[string]int     `json:"errors"`
	Skipped     int64              `json:"skipped"`
	CPU         map[string]float64 `json:"cpu_cores,omitempty"`
	LoadBefore  string             `json:"load_before"`
	LoadAfter   string             `json:"load_after"`
}

// benchAddress is the i-th generated suppressed address; fillSQL writes the same.
func benchAddress(i int) string { return fmt.Sprintf("user%d@d%d.bench.example", i, i%997) }

// benchScope is the scope of the i-th generated suppression: a fifth each in marketing and
// transactional (unsubscribes), the rest global (hard bounces).
func benchScope(i int) string {
	switch i % 5 {
	case 0:
		return "marketing"
	case 1:
		return "transactional"
	}
	return "global"
}

// generate_series keeps the fill inside PostgreSQL: a million rows in seconds, none through Go.
const fillSQL = `
INSERT INTO suppressions (address, scope, reason, provider, event_id, message_id, first_seen, last_seen)
SELECT 'user' || i || '@d' || (i % 997) || '.bench.example',
       CASE i % 5 WHEN 0 THEN 'marketing' WHEN 1 THEN 'transactional' ELSE '' END,
       CASE WHEN i % 5 < 2 THEN 'unsubscribe' ELSE 'hard_bounce' END,
       'bench', 'bench-evt-' || i, 'bench-msg-' || i, now(), now()
FROM generate_series($1::int, $2::int) AS i
ON CONFLICT DO NOTHING`

const fillChunk = 100_000

// fillSuppressions makes the table hold the generated rows 1..n. Chunks commit in order, so
// when row n exists every earlier one does, and an interrupted fill resumes where it stopped.
func fillSuppressions(ctx context.Context, dbURL string, n int, out io.Writer) (rows int64, took time.Duration, err error) {
	pool, err := openDB(ctx, dbURL)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	var done bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM suppressions WHERE address = $1)`, benchAddress(n)).Scan(&done); err != nil {
		return 0, 0, fmt.Errorf("fill: look for row %d: %w", n, err)
	}
	if !done {
		start := time.Now()
		for from := 1; from <= n; from += fillChunk {
			to := min(from+fillChunk-1, n)
			if _, err := pool.Exec(ctx, fillSQL, from, to); err != nil {
				return 0, 0, fmt.Errorf("fill rows %d-%d: %w", from, to, err)
			}
			fmt.Fprintf(out, "filled %d/%d\n", to, n)
		}
		// Fresh statistics, as autovacuum would give a table this size soon enough.
		if _, err := pool.Exec(ctx, `ANALYZE suppressions`); err != nil {
			return 0, 0, fmt.Errorf("fill: analyze: %w", err)
		}
		took = time.Since(start)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM suppressions`).Scan(&rows); err != nil {
		return 0, 0, fmt.Errorf("fill: count: %w", err)
	}
	return rows, took, nil
}

// checkRequest is one check and the answer it must get.
type checkRequest struct {
	address, scope string
	want           bool
}

// nextCheck draws a check: a hit asks a generated address in a scope where it is suppressed; a
// miss asks an address never suppressed, or a scoped address in the other scope.
func nextCheck(r *rand.Rand, n int, hitShare float64) checkRequest {
	i := 1 + r.IntN(n)
	if r.Float64() < hitShare {
		c := checkRequest{address: benchAddress(i), scope: benchScope(i), want: true}
		if c.scope == "global" {
			// A global row answers for every scope.
			c.scope = []string{"", "global", "marketing", "transactional"}[r.IntN(4)]
		}
		if r.IntN(10) == 0 {
			c.address = strings.ToUpper(c.address[:1]) + c.address[1:] // compared lower-cased
		}
		return c
	}
	if r.IntN(2) == 0 {
		return checkRequest{address: fmt.Sprintf("nobody%d@d%d.bench.example", r.Uint64(), i%997), scope: "marketing"}
	}
	i -= i % 5 // a marketing row (i % 5 == 0), asked for transactional mail
	if i == 0 {
		i = 5
	}
	return checkRequest{address: benchAddress(i), scope: "transactional"}
}

// RunSuppressionCheck fills the suppressions and drives GET /v1/suppressions/check open loop.
// It returns an error when any answer failed or was wrong.
func RunSuppressionCheck(ctx context.Context, o SuppressionCheckOptions) (*SuppressionCheckReport, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	if err := requireLoopbackHost(u.Hostname()); err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	if o.Rate <= 0 || o.Fill < 5 || o.Duration <= 0 || o.HitShare < 0 || o.HitShare > 1 || o.MaxInflight < 1 {
		return nil, errors.New("want --rate > 0, --fill ≥ 5, --duration > 0, --hit-share in [0, 1], --max-inflight ≥ 1")
	}
	rep := &SuppressionCheckReport{Rate: o.Rate, Window: o.Duration.String(), Errors: map[string]int{}}
	if rep.Rows, err = func() (int64, error) {
		rows, took, err := fillSuppressions(ctx, o.DatabaseURL, o.Fill, o.Out)
		rep.FillSeconds = took.Seconds()
		return rows, err
	}(); err != nil {
		return nil, err
	}

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: o.MaxInflight, MaxIdleConnsPerHost: o.MaxInflight, IdleConnTimeout: time.Minute, DisableCompression: true,
	}}
	base := strings.TrimRight(o.URL, "/") + "/v1/suppressions/check?"
	var (
		mu        sync.Mutex
		latencies []time.Duration
		inflight  atomic.Int64
		wg        sync.WaitGroup
	)
	record := func(measured bool, d time.Duration, errKey string) {
		if !measured {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		rep.Answered++
		latencies = append(latencies, d)
		if errKey != "" {
			rep.Errors[errKey]++
		}
	}
	send := func(c checkRequest, intended time.Time, measured bool) {
		defer inflight.Add(-1)
		q := url.Values{"address": {c.address}}
		if c.scope != "" {
			q.Set("scope", c.scope)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+o.Token)
		resp, err := client.Do(req)
		if err != nil {
			record(measured, time.Since(intended), "transport")
			return
		}
		var ans struct {
			Suppressed bool `json:"suppressed"`
		}
		decErr := json.NewDecoder(resp.Body).Decode(&ans)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(intended)
		switch {
		case resp.StatusCode != http.StatusOK:
			record(measured, took, fmt.Sprintf("http_%d", resp.StatusCode))
		case decErr != nil:
			record(measured, took, "bad_body")
		case ans.Suppressed != c.want:
			record(measured, took, "wrong_answer")
		default:
			record(measured, took, "")
		}
	}

	r := rand.New(rand.NewPCG(uint64(o.Seed), 16))
	interval := time.Duration(float64(time.Second) / o.Rate)
	start := time.Now().Add(100 * time.Millisecond)
	from, end := start.Add(o.Warmup), start.Add(o.Warmup+o.Duration)
	rep.LoadBefore = LoadAvg()
	var cpuFrom CPUSample
	cpuTaken := false
	for i := 0; ctx.Err() == nil; i++ {
		at := start.Add(time.Duration(i) * interval)
		if !at.Before(end) {
			break
		}
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		measured := !at.Before(from)
		if measured && !cpuTaken {
			cpuFrom, cpuTaken = SampleCPU(o.CPU), true
		}
		c := nextCheck(r, o.Fill, o.HitShare)
		if inflight.Load() >= int64(o.MaxInflight) {
			if measured {
				rep.Skipped++
			}
			continue
		}
		if measured {
			rep.Sent++
			if c.want {
				rep.Hits++
			} else {
				rep.Misses++
			}
		}
		inflight.Add(1)
		wg.Go(func() { send(c, at, measured) })
	}
	wg.Wait()
	if cpuTaken {
		rep.CPU = CPUUse(cpuFrom, SampleCPU(o.CPU))
	}
	rep.LoadAfter = LoadAvg()
	rep.Latency = Summarize(latencies)
	rep.Achieved = float64(rep.Answered-sumErrors(rep.Errors)) / o.Duration.Seconds()
	rep.print(o.Out, o)
	if o.JSONPath != "" {
		if err := WriteJSON(o.JSONPath, rep); err != nil {
			return rep, err
		}
	}
	if n := sumErrors(rep.Errors); n > 0 || rep.Skipped > 0 {
		return rep, fmt.Errorf("%d checks failed or answered wrongly, %d skipped", n, rep.Skipped)
	}
	return rep, ctx.Err()
}

func sumErrors(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func (r *SuppressionCheckReport) print(w io.Writer, o SuppressionCheckOptions) {
	fmt.Fprintf(w, "suppression-check: %d suppressions in the table", r.Rows)
	if r.FillSeconds > 0 {
		fmt.Fprintf(w, " (filled %d generated rows in %.1fs)", o.Fill, r.FillSeconds)
	}
	fmt.Fprintf(w, "\n%.0f checks/s open loop, measured %s after %s warm-up, %.0f%% hits\n", r.Rate, r.Window, o.Warmup, o.HitShare*100)
	fmt.Fprintf(w, "sent %d (%.1f/s; hits %d, misses %d), answered correctly %.1f/s, skipped (over %d in flight) %d\n",
		r.Sent, float64(r.Sent)/o.Duration.Seconds(), r.Hits, r.Misses, r.Achieved, o.MaxInflight, r.Skipped)
	fmt.Fprintf(w, "latency from intended send: %s mean=%s\n", r.Latency, ms(r.Latency.Mean))
	if len(r.Errors) == 0 {
		fmt.Fprintln(w, "errors: none")
	} else {
		fmt.Fprintf(w, "errors: %s\n", kv(r.Errors))
	}
	if len(r.CPU) > 0 {
		fmt.Fprintf(w, "cpu, cores: %s\n", kvf(r.CPU))
	}
	fmt.Fprintf(w, "load average before: %s, after: %s\n", r.LoadBefore, r.LoadAfter)
}

// suppressionCheckCommand is `mailhook-loadtest suppression-check`.
func suppressionCheckCommand() *cobra.Command {
	o := SuppressionCheckOptions{}
	var cpu []string
	cmd := &cobra.Command{
		Use:   "suppression-check",
		Short: "Fill the suppressions and drive GET /v1/suppressions/check open loop",
		Long: `suppression-check makes mailhook's suppressions table hold --fill generated suppressions (a fifth
each in the marketing and transactional scopes, the rest global; added with generate_series
when the last one is missing, so a second run reuses them), then sends GET
/v1/suppressions/check at --rate requests per second, open loop, for --warmup plus --duration,
a --hit-share of them for suppressed address/scope pairs and the rest for addresses never
suppressed or suppressed in another scope. It reports the latency of the measured window from
each request's intended send time (p50, p95, p99, max), the rate answered correctly, and
errors; every answer is checked against the generated data. It exits non-zero when a check
failed, was answered wrongly or was skipped. Loopback addresses only.`,
		Example: `  mailhook-loadtest suppression-check --url http://127.0.0.1:18081 --token … \
    --database-url postgres://postgres@127.0.0.1:5432/mailhook_suppcheck --fill 1000000 --rate 1000 --duration 30s`,
		RunE: func(c *cobra.Command, _ []string) error {
			var err error
			if o.CPU, err = ParseCPUTargets(cpu); err != nil {
				return err
			}
			if o.Token == "" || o.DatabaseURL == "" {
				return errors.New("--token and --database-url are required")
			}
			o.Out = c.OutOrStdout()
			_, err = RunSuppressionCheck(c.Context(), o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.URL, "url", "http://127.0.0.1:8000", "mailhook base URL (loopback)")
	f.StringVar(&o.Token, "token", os.Getenv("MAILHOOK_ADMIN_TOKEN"), "admin API token (default $MAILHOOK_ADMIN_TOKEN)")
	f.StringVar(&o.DatabaseURL, "database-url", "", "mailhook's PostgreSQL database, migrated (loopback)")
	f.IntVar(&o.Fill, "fill", 1_000_000, "generated suppressions the table must hold")
	f.Float64Var(&o.Rate, "rate", 1000, "checks per second, open loop")
	f.DurationVar(&o.Duration, "duration", 30*time.Second, "measured window")
	f.DurationVar(&o.Warmup, "warmup", 3*time.Second, "sent before the measured window, not counted")
	f.Float64Var(&o.HitShare, "hit-share", 0.5, "share of checks whose answer is suppressed")
	f.IntVar(&o.MaxInflight, "max-inflight", 500, "most checks in flight; beyond it a check is skipped and counted")
	f.Int64Var(&o.Seed, "seed", 1, "random seed (same seed, same checks)")
	f.StringArrayVar(&cpu, "cpu", nil, "label=pid[+pid…] or label=user:NAME: report the cores those processes used (repeatable)")
	f.StringVar(&o.JSONPath, "json", "", "also write the report as JSON to this file")
	return cmd
}
