package console_test

import (
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/console"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// realConsole is the console over a real PostgreSQL store, wired as serve.go wires it for the
// pages these tests read.
func realConsole(t *testing.T) (*httptest.Server, *store.Store, *pgxpool.Pool) {
	t.Helper()
	dbURL := storetest.NewDatabase(t)
	st := storetest.OpenURL(t, dbURL, store.Options{})
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2 // the tests' own rows; the PostgreSQL is shared
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	log := slog.New(slog.DiscardHandler)
	api := &httpapi.Server{AdminTokens: map[string]string{adminToken: "ops"}, Explorer: st.Explorer, Messages: st.Messages,
		Reconciler: reconcile.New(st.Counts, st.Replays, nil, nil, log),
		Endpoints:  map[string]httpapi.Endpoint{"postscale": {Name: "postscale", Provider: "postscale"}}, Log: log}
	con, err := console.New(api, console.Reads{MessageState: st.Messages.GetMessageState,
		StoredDailyCounts: st.Counts.StoredDailyCounts, ProviderCounts: st.Counts.ProviderCounts}, log)
	if err != nil {
		t.Fatal(err)
	}
	api.Console = con
	srv := httptest.NewServer(api.AdminHandler())
	t.Cleanup(srv.Close)
	return srv, st, pool
}

var (
	eventRow  = regexp.MustCompile(`<tr data-event="([^"]+)" data-precedence`)
	notifRow  = regexp.MustCompile(`<tr data-notification="n_([^"]+)"`)
	newerLink = regexp.MustCompile(`<a href="([^"]+)" data-newer>`)
	olderLink = regexp.MustCompile(`<a href="([^"]+)" data-older>`)
)

// A busy message's page shows its timeline a page at a time: the first events in arrival order
// with their own notifications only, and "newer"/"older" links that walk every event once each
// way; an ordinary message is one page without links.
func TestABusyMessagesTimelinePagesInTheConsole(t *testing.T) {
	srv, st, pool := realConsole(t)
	ctx := t.Context()
	const events = 230
	var want []string
	for i := range events {
		id := fmt.Sprintf("evt_%03d", i)
		want = append(want, id)
		ev := domain.Event{Provider: "postscale", EventID: id, Type: "email.opened", Kind: domain.KindOpened, MessageID: "msg_busy",
			OccurredAt: time.Date(2026, 12, 1, 8, 0, i, 0, time.UTC), Raw: json.RawMessage(`{}`)}
		if _, err := storetest.Enqueue(ctx, st, ev); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Events.Process(ctx, ev.Provider, ev.EventID, false, apply.Rules{}); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO notifications (id, provider, event_id, sink, type, body) VALUES ($1, 'postscale', $2, 'app', 'message.opened', '{}')`,
			"n_"+id, id); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := signIn(t, srv, adminToken)
	read := func(target string) (ids []string, newer, older string) {
		t.Helper()
		code, body, _ := get(t, c, srv.URL+target)
		if code != 200 {
			t.Fatalf("GET %s: %d\n%.400s", target, code, body)
		}
		for _, m := range eventRow.FindAllStringSubmatch(body, -1) {
			ids = append(ids, m[1])
		}
		var notified []string
		for _, m := range notifRow.FindAllStringSubmatch(body, -1) {
			notified = append(notified, m[1])
		}
		if strings.Join(notified, ",") != strings.Join(ids, ",") {
			t.Errorf("GET %s: notifications of %v, events %v", target, notified, ids)
		}
		if m := newerLink.FindStringSubmatch(body); m != nil {
			newer = html.UnescapeString(m[1])
		}
		if m := olderLink.FindStringSubmatch(body); m != nil {
			older = html.UnescapeString(m[1])
		}
		return ids, newer, older
	}
	var seen []string
	target := "/console/messages?provider=postscale&id=msg_busy"
	ids, newer, older := read(target)
	if len(ids) != 100 || older != "" || newer == "" {
		t.Fatalf("first page: %d events, older %q, newer %q", len(ids), older, newer)
	}
	seen = append(seen, ids...)
	var last string
	for n := 0; newer != ""; n++ {
		if n > 5 {
			t.Fatal("more pages than events")
		}
		last = newer
		ids, newer, older = read(newer)
		if older == "" {
			t.Errorf("page %s has no older link", last)
		}
		seen = append(seen, ids...)
	}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("newer walk: %d events, want each of %d once in arrival order", len(seen), events)
	}
	var back []string
	for n := 0; older != ""; n++ {
		if n > 5 {
			t.Fatal("more pages than events")
		}
		ids, _, older = read(older)
		back = append(ids, back...)
	}
	if len(back) != events-events%100 || strings.Join(back, ",") != strings.Join(want[:len(back)], ",") {
		t.Errorf("older walk: %d events %v…, want the first %d in order", len(back), back[:min(3, len(back))], events-events%100)
	}

	lone := domain.Event{Provider: "postscale", EventID: "lone", Type: "email.opened", Kind: domain.KindOpened, MessageID: "msg_lone", Raw: json.RawMessage(`{}`)}
	if _, err := storetest.Enqueue(ctx, st, lone); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Events.Process(ctx, "postscale", "lone", false, apply.Rules{}); err != nil {
		t.Fatal(err)
	}
	code, body, _ := get(t, c, srv.URL+"/console/messages?provider=postscale&id=msg_lone")
	if code != 200 || len(eventRow.FindAllString(body, -1)) != 1 || strings.Contains(body, "data-timeline-pages") {
		t.Errorf("an ordinary message: %d, %d events, pages %v", code, len(eventRow.FindAllString(body, -1)), strings.Contains(body, "data-timeline-pages"))
	}
	if code, body, _ := get(t, c, srv.URL+"/console/messages?provider=postscale&id=msg_busy&after=nonsense"); code != 400 {
		t.Errorf("a bad cursor: %d %.200s", code, body)
	}
}

// The Reconciliation page shows what the daily reconciliation stored for the day, and when it
// was computed, without counting the events again: an event received since is not in it. A day
// not counted yet says so and offers "Count now", which counts the events live.
func TestTheReconciliationPageShowsTheStoredCounts(t *testing.T) {
	srv, st, pool := realConsole(t)
	ctx := t.Context()
	day := time.Now().UTC().AddDate(0, 0, -1)
	record := func(id string) {
		t.Helper()
		ev := domain.Event{Provider: "postscale", EventID: id, Type: "email.bounced", Kind: domain.KindStatus, Status: domain.StatusBounced, Raw: json.RawMessage(`{}`)}
		if _, err := st.Events.RecordEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if err := storetest.Backdate(ctx, st, pool, day, id); err != nil {
			t.Fatal(err)
		}
	}
	record("e1")
	record("e2")
	if _, err := st.Counts.SaveDailyCounts(ctx, day); err != nil {
		t.Fatal(err)
	}
	record("e3") // after the daily run: the page shows what it counted
	c, _ := signIn(t, srv, adminToken)
	cell := regexp.MustCompile(`<tr><td>postscale</td><td>email.bounced</td><td class="n">(\d+)</td>`)
	code, body, _ := get(t, c, srv.URL+"/console/reconciliation")
	m := cell.FindStringSubmatch(body)
	if code != 200 || !strings.Contains(body, `data-counted="stored"`) || m == nil || m[1] != "2" {
		t.Fatalf("yesterday, stored: %d, received %v\n%s", code, m, body)
	}
	code, body, _ = get(t, c, srv.URL+"/console/reconciliation?live=1&date="+day.Format(domain.DateLayout))
	if m := cell.FindStringSubmatch(body); code != 200 || !strings.Contains(body, `data-counted="live"`) || m == nil || m[1] != "3" {
		t.Fatalf("counted now: %d, received %v\n%s", code, m, body)
	}
	code, body, _ = get(t, c, srv.URL+"/console/reconciliation?date="+time.Now().UTC().Format(domain.DateLayout))
	if code != 200 || !strings.Contains(body, `data-counted="none"`) || !strings.Contains(body, `data-action="count-now"`) || cell.MatchString(body) {
		t.Fatalf("today, not counted yet: %d\n%s", code, body)
	}
	if code, _, _ = get(t, c, srv.URL+"/console/reconciliation?date=yesterday"); code != 400 {
		t.Errorf("a bad date: %d", code)
	}
}
