package console_test

import (
	"cmp"
	"context"
	"fmt"
	"html"
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
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/console"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/store"
)

// TestConsoleExplorerBench answers every console page (the explorer's: Events, Audit, a
// recipient's messages, a message's timeline and its pages; and Overview, Rejected, Quarantine,
// Sinks, Suppressions, Reconciliation, Erasures) MAILHOOK_EXPLORER_BENCH_RUNS times against the seeded
// database at MAILHOOK_EXPLORER_BENCH_URL (scripts/explorer-bench.sh) through the real console
// and store, signed in, and prints each page's p50, p95 and max server time (the page's reads
// and its rendering). It is a measurement, not a check: it fails only when a page does not
// answer 200.
func TestConsoleExplorerBench(t *testing.T) {
	dbURL := os.Getenv("MAILHOOK_EXPLORER_BENCH_URL")
	if dbURL == "" {
		t.Skip("MAILHOOK_EXPLORER_BENCH_URL is not set (scripts/explorer-bench.sh sets it)")
	}
	runs, _ := strconv.Atoi(os.Getenv("MAILHOOK_EXPLORER_BENCH_RUNS"))
	if runs < 1 {
		runs = 60
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Wired as internal/serve wires the console, minus Temporal (no page reads it).
	api := &httpapi.Server{Explorer: st.Explorer, Audit: st.Audit, Messages: st.Messages, AdminTokens: map[string]string{"bench-token": "bench"},
		TemporalUI: "http://127.0.0.1:8233", Endpoints: map[string]httpapi.Endpoint{"postscale": {Name: "postscale", Provider: "postscale"}}, Log: log,
		Suppressions: st.Suppressions, Quarantine: st.Quarantined, Reconciler: reconcile.New(st.Counts, st.Replays, nil, nil, log),
		SinkStates: st.Sinks, Sinks: []httpapi.SinkSettings{{Name: "app", Kind: "http"}, {Name: "crm", Kind: "http"}}, RejectedList: st.Rejected}
	con, err := console.New(api, console.Reads{
		AcceptedPerMinute: st.Counts.AcceptedPerMinute, RejectedPerMinute: st.Rejected.RejectedPerMinute,
		Unprocessed: st.Inbox.UnprocessedCapped, QuarantineCount: st.Quarantined.QuarantineCount,
		LatestProviderCounts: st.Counts.LatestProviderCounts, ErasureJobs: st.Erasures.ListErasureJobs,
		ParkedByType: st.Sinks.ParkedByType, MessageState: st.Messages.GetMessageState,
		StoredDailyCounts: st.Counts.StoredDailyCounts, ProviderCounts: st.Counts.ProviderCounts,
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	api.Console = con
	h := api.AdminHandler()
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := browser(t)
	_, body, _ := get(t, c, srv.URL+"/console/login")
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("login page: no CSRF token")
	}
	if code, _, _ := post(t, c, srv.URL+"/console/login", url.Values{"csrf": {m[1]}, "token": {"bench-token"}}); code != http.StatusSeeOther {
		t.Fatalf("sign in: %d", code)
	}
	u, _ := url.Parse(srv.URL + "/console")
	var cookie string
	for _, ck := range c.Jar.Cookies(u) {
		cookie += ck.Name + "=" + ck.Value + "; "
	}
	// In-process, as TestExplorerBench times the API's handlers: the page's server time.
	page := func(target string) (int, string, time.Duration) {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req.Header.Set("Cookie", cookie)
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String(), time.Since(start)
	}
	// The day the Reconciliation page shows: the seed's busiest whole day, counted once by the
	// daily reconciliation's own statement if it was not yet (SaveDailyCounts).
	day := time.Now().UTC().AddDate(0, 0, -2).Format(domain.DateLayout)
	if counts, _, err := st.Counts.StoredDailyCounts(ctx, time.Now().UTC().AddDate(0, 0, -2), ""); err != nil {
		t.Fatal(err)
	} else if len(counts) == 0 {
		if _, err := st.Counts.SaveDailyCounts(ctx, time.Now().UTC().AddDate(0, 0, -2)); err != nil {
			t.Fatal(err)
		}
	}
	// The busy message's pages: the second (newer) and the last one before the end (older).
	second, older := timelinePages(t, page, "/console/messages?provider=postscale&id=msg_busy")
	// Each page must show what it is timed for (want), not an empty list or an error.
	shapes := []struct {
		name, target, want string
		most               int // runs at most (0: every run): a live count takes seconds
	}{
		{"Overview", "/console", "data-actor", 0},
		{"Rejected", "/console/rejected", "bad_signature", 0},
		{"Quarantine", "/console/quarantine", "data-actor", 0},
		{"Sinks", "/console/sinks", "crm", 0},
		{"Suppressions, an address checked", "/console/suppressions?address=user1234%40example.com", "data-actor", 0},
		{"Reconciliation, a day as the daily reconciliation stored it", "/console/reconciliation?date=" + day, `data-counted="stored"`, 0},
		{"Reconciliation, the same day counted now (as main counts every visit)", "/console/reconciliation?live=1&date=" + day, `data-counted="live"`, 5},
		{"Erasures", "/console/erasures", "data-actor", 0},
		{"Events, newest first", "/console/events", "data-event=", 0},
		{"Events, provider + type", "/console/events?provider=resend&type=email.bounced", "data-event=", 0},
		{"Events, recipient", "/console/events?recipient=user1234%40example.com", "data-event=", 0},
		{"Events, outcome flagged (0.005%)", "/console/events?outcome=flagged", "data-event=", 0},
		{"Messages, by recipient", "/console/messages?recipient=user1234%40example.com", "data-found-message=", 0},
		{"Messages, a message's timeline", "/console/messages?provider=postscale&id=msg_13", "data-precedence=", 0},
		{"Messages, a busy message's timeline (2,000 events)", "/console/messages?provider=postscale&id=msg_busy", "data-newer", 0},
		{"Messages, a busy message's timeline, its second page", second, "data-older", 0},
		{"Messages, a busy message's timeline, a page of older events", older, "data-newer", 0},
		{"Audit, newest first", "/console/audit", "data-audit=", 0},
		{"Audit, one action", "/console/audit?action=erasure", "data-audit=", 0},
	}
	fmt.Printf("| console page | p50 ms | p95 ms | max ms | KiB | rows |\n|---|---|---|---|---|---|\n")
	for _, s := range shapes {
		var took []time.Duration
		size, rows := 0, 0
		for range cmp.Or(min(s.most, runs), runs) {
			code, body, d := page(s.target)
			if code != 200 || !strings.Contains(body, "data-actor") || !strings.Contains(body, s.want) {
				t.Fatalf("%s: %d %.300s", s.target, code, body)
			}
			took, size = append(took, d), len(body)
			rows = strings.Count(body, "<tr data-")
		}
		slices.Sort(took)
		ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) }
		p := func(q float64) time.Duration { return took[min(len(took)-1, int(q*float64(len(took))))] }
		fmt.Printf("| %s | %s | %s | %s | %d | %d |\n", s.name, ms(p(0.5)), ms(p(0.95)), ms(took[len(took)-1]), size/1024, rows)
	}
}

var consoleNewer, consoleOlder = regexp.MustCompile(`<a href="([^"]+)" data-newer>`), regexp.MustCompile(`<a href="([^"]+)" data-older>`)

// timelinePages follows a busy message's "newer" links from its first page: the second page,
// and the "older" link of the last page.
func timelinePages(t *testing.T, page func(string) (int, string, time.Duration), first string) (second, older string) {
	t.Helper()
	target := first
	for n := 0; ; n++ {
		code, body, _ := page(target)
		m := consoleNewer.FindStringSubmatch(body)
		if code != 200 || n > 100 {
			t.Fatalf("%s: %d", target, code)
		}
		if m == nil {
			o := consoleOlder.FindStringSubmatch(body)
			if o == nil {
				t.Fatalf("%s: the last page has no older link", target)
			}
			return second, html.UnescapeString(o[1])
		}
		target = html.UnescapeString(m[1])
		if n == 0 {
			second = target
		}
	}
}
