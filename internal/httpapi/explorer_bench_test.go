package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/store"
)

// lastQuery keeps the SQL and arguments of the queries a request made, so the bench can show
// their plans.
type lastQuery struct {
	mu      sync.Mutex
	queries []capturedQuery
}

type capturedQuery struct {
	sql  string
	args []any
}

func (l *lastQuery) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.queries = append(l.queries, capturedQuery{d.SQL, d.Args})
	l.mu.Unlock()
	return ctx
}

func (l *lastQuery) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *lastQuery) take() []capturedQuery {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queries
	l.queries = nil
	return q
}

var planNode = regexp.MustCompile(`^\s*(?:->\s+)?(Seq Scan|Index Only Scan|Index Scan|Bitmap Heap Scan|Bitmap Index Scan|Incremental Sort|Sort|Nested Loop|Hash Join|Merge Join|Limit)( Backward)?( using (\S+))?( on (\S+))?(?: \S+)?\s+\(cost`)

// TestExplorerBench answers each explorer query shape MAILHOOK_EXPLORER_BENCH_RUNS times against
// the seeded database at MAILHOOK_EXPLORER_BENCH_URL (scripts/explorer-bench.sh) through the
// real handlers and store, and prints each shape's p50, p95 and max server time and its plan's
// shape. It is a measurement, not a check: it fails only when a request does not answer 200.
func TestExplorerBench(t *testing.T) {
	dbURL := os.Getenv("MAILHOOK_EXPLORER_BENCH_URL")
	if dbURL == "" {
		t.Skip("MAILHOOK_EXPLORER_BENCH_URL is not set (scripts/explorer-bench.sh sets it)")
	}
	runs, _ := strconv.Atoi(os.Getenv("MAILHOOK_EXPLORER_BENCH_RUNS"))
	if runs < 1 {
		runs = 60
	}
	ctx := context.Background()
	tracer := &lastQuery{}
	st, err := store.Open(ctx, dbURL, store.Options{Tracer: tracer})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := &httpapi.Server{Explorer: st.Explorer, Audit: st.Audit, AdminTokens: map[string]string{"bench": "bench"},
		TemporalUI: "http://127.0.0.1:8233", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h := srv.AdminHandler()
	get := func(target string) (int, []byte, time.Duration) {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req.Header.Set("Authorization", "Bearer bench")
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.Bytes(), time.Since(start)
	}
	// A cursor from the middle of the table, for a deep page.
	var mid string
	pg, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	// As the store plans a page and a timeline (store.Explorer: no parallel workers).
	if _, err := pg.Exec(ctx, `SET max_parallel_workers_per_gather = 0`); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	var prov, id string
	if err := pg.QueryRow(ctx, `SELECT received_at, provider, event_id FROM webhook_events ORDER BY received_at DESC OFFSET (SELECT reltuples::bigint / 2 FROM pg_class WHERE relname = 'webhook_events') LIMIT 1`).Scan(&at, &prov, &id); err != nil {
		t.Fatal(err)
	}
	// The list's own cursor for that row: a first page ending there is not at hand, so walk one
	// page with until set just after it and take its next_after.
	code, body, _ := get("/v1/events?limit=1&until=" + url.QueryEscape(at.Add(time.Microsecond).Format(time.RFC3339Nano)))
	var page struct {
		NextAfter string `json:"next_after"`
	}
	if code != 200 || json.Unmarshal(body, &page) != nil {
		t.Fatalf("cursor: %d %s", code, body)
	}
	mid = page.NextAfter
	midTime := at
	hour := func(from time.Time, d time.Duration) string {
		return "since=" + url.QueryEscape(from.UTC().Format(time.RFC3339)) + "&until=" + url.QueryEscape(from.Add(d).UTC().Format(time.RFC3339))
	}
	// The busy message's timeline cursors: after its tenth page, and before its last.
	var busyMid, busyBefore string
	for n, target := 0, "/v1/messages/postscale/msg_busy/timeline"; ; n++ {
		code, body, _ := get(target)
		var tl struct {
			NextAfter  string `json:"next_after"`
			PrevBefore string `json:"prev_before"`
		}
		if code != 200 || json.Unmarshal(body, &tl) != nil || n > 100 {
			t.Fatalf("timeline pages: %d %.300s", code, body)
		}
		if n == 9 {
			busyMid = tl.NextAfter
		}
		if tl.NextAfter == "" {
			busyBefore = tl.PrevBefore
			break
		}
		target = "/v1/messages/postscale/msg_busy/timeline?after=" + url.QueryEscape(tl.NextAfter)
	}
	tracer.take() // the walk's queries are no shape's
	shapes := []struct{ name, target string }{
		{"newest first, no filter", "/v1/events"},
		{"a deep page (after a cursor in the middle)", "/v1/events?after=" + url.QueryEscape(mid)},
		{"provider (70% of events)", "/v1/events?provider=postscale"},
		{"provider (8% of events)", "/v1/events?provider=resend"},
		{"type email.bounced (0.4%)", "/v1/events?type=email.bounced"},
		{"outcome stale (2.5%)", "/v1/events?outcome=stale"},
		{"outcome flagged (0.005%)", "/v1/events?outcome=flagged"},
		{"recipient", "/v1/events?recipient=user1234%40example.com"},
		{"recipient written with a display name", "/v1/events?recipient=User10%40EXAMPLE.com"},
		{"message id", "/v1/events?message_id=msg_123457"},
		{"time range (1 h)", "/v1/events?" + hour(midTime, time.Hour)},
		{"quarantined", "/v1/events?quarantined=true"},
		{"accepted through Temporal", "/v1/events?through_temporal=true"},
		{"provider + type", "/v1/events?provider=resend&type=email.bounced"},
		{"provider + time range (1 h)", "/v1/events?provider=sendgrid&" + hour(midTime, time.Hour)},
		{"type + outcome", "/v1/events?type=email.delivered&outcome=stale"},
		{"recipient + type", "/v1/events?recipient=user1234%40example.com&type=email.delivered"},
		{"provider + quarantined", "/v1/events?provider=postscale&quarantined=true"},
		{"type + time range (1 day)", "/v1/events?type=email.bounced&" + hour(midTime, 24*time.Hour)},
		{"timeline of a busy message (2,000 events, 2 sinks)", "/v1/messages/postscale/msg_busy/timeline"},
		{"timeline of a busy message, a middle page (after)", "/v1/messages/postscale/msg_busy/timeline?after=" + url.QueryEscape(busyMid)},
		{"timeline of a busy message, the page before its last (before)", "/v1/messages/postscale/msg_busy/timeline?before=" + url.QueryEscape(busyBefore)},
		{"timeline of a busy message, 1,000 events a page (limit=1000)", "/v1/messages/postscale/msg_busy/timeline?limit=1000"},
		{"timeline of a message", "/v1/messages/postscale/msg_13/timeline"},
		{"audit, newest first", "/v1/audit"},
		{"audit, one action", "/v1/audit?action=erasure"},
		{"audit, one token", "/v1/audit?token=token-3"},
		{"audit, time range (1 day)", "/v1/audit?" + hour(time.Now().Add(-100*24*time.Hour), 24*time.Hour)},
	}
	fmt.Printf("| query | rows | p50 ms | p95 ms | max ms | plan |\n|---|---|---|---|---|---|\n")
	for _, s := range shapes {
		var took []time.Duration
		rows := 0
		for i := range runs {
			code, body, d := get(s.target)
			if code != 200 {
				t.Fatalf("%s: %d %s", s.target, code, body)
			}
			took = append(took, d)
			if i == 0 {
				var any map[string]json.RawMessage
				_ = json.Unmarshal(body, &any)
				for _, k := range []string{"events", "entries"} {
					var list []json.RawMessage
					if json.Unmarshal(any[k], &list) == nil && list != nil {
						rows = len(list)
					}
				}
			}
			if i < runs-1 {
				tracer.take()
			}
		}
		slices.Sort(took)
		ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) }
		p := func(q float64) time.Duration { return took[min(len(took)-1, int(q*float64(len(took))))] }
		fmt.Printf("| %s | %d | %s | %s | %s | %s |\n", s.name, rows, ms(p(0.5)), ms(p(0.95)), ms(took[len(took)-1]), plans(ctx, t, pg, tracer.take()))
	}
}

// plans is the shape of each captured query's plan: its scan, join and sort nodes, with the
// index or table each reads, and its execution time.
func plans(ctx context.Context, t *testing.T, pg *pgx.Conn, qs []capturedQuery) string {
	var out []string
	for _, q := range qs {
		if !strings.Contains(q.sql, "SELECT") {
			continue
		}
		rows, err := pg.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q.sql, q.args...)
		if err != nil {
			t.Fatalf("explain %s: %v", q.sql, err)
		}
		var nodes []string
		var exec, line string
		_, err = pgx.ForEachRow(rows, []any{&line}, func() error {
			if m := planNode.FindStringSubmatch(line); m != nil {
				n := m[1] + m[2]
				if m[4] != "" {
					n += " " + m[4]
				} else if m[6] != "" {
					n += " " + m[6]
				}
				nodes = append(nodes, n)
			}
			if strings.Contains(line, "Execution Time") {
				exec = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "Execution Time:"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join(nodes, " → ")+" ("+exec+")")
	}
	return strings.Join(out, "; ")
}
