package e2e_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/simulate"
	"github.com/mailhook/mailhook/internal/testenv"
)

const viewerToken = "e2e-viewer-token-0123456789"

// browserTools finds node, Debian's chromium and playwright-core (scripts/ensure-browser.sh
// installs them; playwright-core is cached outside the repo). Missing, the test fails naming
// what is missing (CI), or is skipped with -short.
func browserTools(t *testing.T) (node, chromium, nodePath string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the browser test")
	}
	node, err := exec.LookPath("node")
	testenv.Need(t, "node (Debian's nodejs; scripts/ensure-browser.sh)", err)
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	_, err = os.Stat(chromium)
	testenv.Need(t, "Debian's chromium at "+chromium+" (scripts/ensure-browser.sh installs it)", err)
	cache := os.Getenv("SCREENSHOTS_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "mailhook-screenshots")
	}
	nodePath = filepath.Join(cache, "node_modules")
	_, err = os.Stat(filepath.Join(nodePath, "playwright-core", "package.json"))
	testenv.Need(t, "playwright-core in "+nodePath+" (scripts/ensure-browser.sh installs it)", err)
	return node, chromium, nodePath
}

// consoleRun is what testdata/console.cjs prints.
type consoleRun struct {
	SignedOutLandsOn string `json:"signedOutLandsOn"`
	SignInStatus     int    `json:"signInStatus"`
	AfterSignIn      string `json:"afterSignIn"`
	Cookie           *struct {
		HTTPOnly bool   `json:"httpOnly"`
		SameSite string `json:"sameSite"`
		Path     string `json:"path"`
		HasToken bool   `json:"hasToken"`
	} `json:"cookie"`
	Menu  []string `json:"menu"`
	Pages map[string]struct {
		Status  int      `json:"status"`
		URL     string   `json:"url"`
		Actor   string   `json:"actor"`
		Erased  bool     `json:"erased"`
		Text    string   `json:"text"`
		Actions []string `json:"actions"`
		CSP     string   `json:"csp"`
	} `json:"pages"`
	Message struct {
		Status        string   `json:"status"`
		Recipient     string   `json:"recipient"`
		Events        []string `json:"events"`
		Notifications int      `json:"notifications"`
	} `json:"message"`
	DryRun struct {
		Count  int64  `json:"count"`
		Notice string `json:"notice"`
	} `json:"dryRun"`
	RedeliverStatus int    `json:"redeliverStatus"`
	RedeliverNotice string `json:"redeliverNotice"`
	Forged          struct {
		NoCSRF  int `json:"noCSRF"`
		BadCSRF int `json:"badCSRF"`
	} `json:"forged"`
	AfterSignOut      string   `json:"afterSignOut"`
	AfterSignOutSinks string   `json:"afterSignOutSinks"`
	ConsoleErrors     []string `json:"consoleErrors"`
	Viewer            struct {
		Menu  []string `json:"menu"`
		Pages map[string]struct {
			Status  int      `json:"status"`
			Actions []string `json:"actions"`
		} `json:"pages"`
		CheckActions     []string `json:"checkActions"`
		PauseWithItsCSRF int      `json:"pauseWithItsCSRF"`
		PauseBody        bool     `json:"pauseBody"`
	} `json:"viewer"`
	EventsByRecipient []string `json:"eventsByRecipient"`
	ErasedSearch      int      `json:"erasedSearch"`
	ErasedEvents      int      `json:"erasedEvents"`
	ByRecipient       []string `json:"byRecipient"`
	ByRecipientText   string   `json:"byRecipientText"`
	Timeline          struct {
		Events []struct {
			Event      string `json:"event"`
			Precedence string `json:"precedence"`
			Version    string `json:"version"`
		} `json:"events"`
		Sinks         []string `json:"sinks"`
		Notifications []string `json:"notifications"`
		WorkflowLinks []string `json:"workflowLinks"`
	} `json:"timeline"`
	Acts        map[string]int `json:"acts"`
	RetryErrors []string       `json:"retryErrors"`
	Audit       []struct {
		Action string `json:"action"`
		Via    string `json:"via"`
		Text   string `json:"text"`
	} `json:"audit"`
}

// temporalUI is the console test's temporal.ui_url: the timeline links each run into it.
const temporalUI = "http://temporal-ui.example:8233"

// The console in a real browser, over the real wiring (serve's HTTPServer, PostgreSQL, Temporal)
// and real data: a simulated lifecycle whose notifications the sink refused, a refused request,
// a second sink that is down and parks, an erased address. Chromium signs in, opens every page,
// finds the message with its events, runs a redelivery's dry run and then the real one (each id
// delivered once, at the sink), is refused forged POSTs, signs out; a read-only token sees no
// action and is refused one; the erased address is on no page.
//
// CONSOLE_SCREENSHOTS=<dir> also saves each page's screenshot there
// (scripts/console-screenshots.sh).
func TestConsoleInABrowser(t *testing.T) {
	node, chromium, nodePath := browserTools(t)
	var gone atomic.Bool
	gone.Store(true)
	down := newReceiver(t)
	down.respond = func(string, int) int { return http.StatusServiceUnavailable }
	h := newHarness(t, harnessOptions{
		temporalUI: temporalUI,
		adminTokens: []config.AdminToken{{Name: "viewer", Token: viewerToken,
			Scopes: []string{domain.ScopeMessagesRead, domain.ScopeReportsRead, domain.ScopeSinksRead, domain.ScopeSuppressionsRead}}},
		notify: func(n *config.Notify) { n.CircuitFailures = 2 },
		sinks: func(s []config.Sink) []config.Sink {
			return append(s, config.Sink{Name: "backup", URL: down.srv.URL, Secret: sinkSecret, Types: []string{domain.TypeStatusChanged}})
		},
	})
	// As serve does at start: each configured sink's row, so its counts are its own.
	if err := h.svc.EnsureSinks(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The sink "app" refuses for good (410) until the redelivery: its notifications fail.
	h.sink.respond = func(string, int) int {
		if gone.Load() {
			return http.StatusGone
		}
		return http.StatusOK
	}

	// A simulated lifecycle (out of order, a duplicate, an inbound email), as mailhook simulate
	// sends it.
	message, inbound := h.id("msg_console"), h.id("inb_console")
	for _, step := range simulate.Lifecycle(message, inbound, time.Now().Add(-15*time.Minute)) {
		if code, body := h.post(string(step.Body)); code != http.StatusOK {
			t.Fatalf("%s: %d %v", step.Name, code, body)
		}
	}
	// A message to an address that is then erased.
	erased := "erase.me." + h.prefix + "@example.org"
	erasedMsg := h.id("msg_erased")
	for i, typ := range []string{"email.sent", "email.bounced"} {
		body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":%q,"data":{"email_id":%q,"from":"hello@app.example","to":%q,"subject":"Hi","bounce_type":"hard"}}`,
			h.id(fmt.Sprintf("evt_erased_%d", i)), typ, time.Now().Add(time.Duration(i-10)*time.Minute).UTC().Format(time.RFC3339), erasedMsg, erased)
		if code, out := h.post(body); code != http.StatusOK {
			t.Fatalf("post %s: %d %v", typ, code, out)
		}
	}
	// A refused request, kept with its cause.
	refused := h.envelope(h.id("evt_refused"), "email.delivered", h.id("msg_refused"), time.Now(), "")
	if code, _ := h.postSigned(refused, "whsec_not-the-endpoints-secret", time.Now()); code != http.StatusUnauthorized {
		t.Fatalf("badly signed: %d, want 401", code)
	}

	h.waitCond("the lifecycle settled", func() (int64, bool) {
		code, m := h.message(message)
		return int64(len(m.Events)), code == 200 && m.Status == "bounced" && len(m.Events) == 4
	})
	h.waitQuery(0, `SELECT count(*) FROM webhook_events WHERE processed_at IS NULL`)
	h.waitQuery(1, `SELECT count(*) FROM rejected_requests`)
	h.waitCond("backup parks", func() (int64, bool) {
		n := h.query(`SELECT count(*) FROM notifications WHERE sink = 'backup' AND status = 'parked'`)
		return int64(n), n > 0 && n == h.query(`SELECT count(*) FROM notifications WHERE sink = 'backup'`)
	})
	failed := h.query(`SELECT count(*) FROM notifications WHERE sink = 'app' AND status = 'failed'`)
	if failed == 0 || h.query(`SELECT count(*) FROM notifications WHERE sink = 'app' AND status NOT IN ('failed')`) != 0 {
		t.Fatalf("the sink app's notifications: %d failed, want all of them", failed)
	}
	var failedIDs []string
	rows, err := h.db.Query(t.Context(), `SELECT id FROM notifications WHERE sink = 'app' AND status = 'failed'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		failedIDs = append(failedIDs, id)
	}
	rows.Close()
	if code, out := h.admin(http.MethodPost, "/v1/erasures", fmt.Sprintf(`{"address":%q,"reason":"request 42","force":true}`, erased)); code != http.StatusOK {
		t.Fatalf("erase: %d %v", code, out)
	}
	if code, out := h.admin(http.MethodGet, "/v1/reports/daily?date="+time.Now().UTC().Format("2006-01-02"), ""); code != 200 {
		t.Fatalf("daily report: %d %v", code, out)
	}
	gone.Store(false) // the sink app takes notifications again: the redelivery will reach it

	shots := os.Getenv("CONSOLE_SCREENSHOTS")
	input, _ := json.Marshal(map[string]string{"base": h.api.URL, "admin": adminToken, "viewer": viewerToken, "provider": "postscale",
		"message": message, "erased": erased, "erasedMessage": erasedMsg, "recipient": simulate.Recipient, "sink": "app", "backupSink": "backup", "screenshots": shots})
	cmd := exec.CommandContext(t.Context(), node, "testdata/console.cjs")
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath, "CHROMIUM="+chromium, "CONSOLE_INPUT="+string(input))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("the browser script failed: %v\n%s", err, stderr.String())
		}
		t.Fatalf("run node: %v", err)
	}
	var run consoleRun
	if err := json.Unmarshal(stdout.Bytes(), &run); err != nil {
		t.Fatalf("the browser script's output: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}

	// Sign in.
	// Signed out, the sinks page sends to the sign-in, which returns to it.
	if run.SignedOutLandsOn != "/console/login" || run.AfterSignIn != "/console/sinks" || run.SignInStatus != 200 {
		t.Errorf("sign in: signed out landed on %q, after sign-in %q (%d)", run.SignedOutLandsOn, run.AfterSignIn, run.SignInStatus)
	}
	if c := run.Cookie; c == nil || !c.HTTPOnly || c.SameSite != "Strict" || c.Path != "/console" || c.HasToken {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/console, without the token", c)
	}
	wantMenu := []string{"Overview", "Messages", "Events", "Rejected", "Quarantine", "Sinks", "Suppressions", "Reconciliation", "Erasures", "Audit"}
	if !slices.Equal(run.Menu, wantMenu) {
		t.Errorf("menu %v, want %v", run.Menu, wantMenu)
	}
	// Every page renders, with the data made above.
	want := map[string][]string{
		"overview":       {"Accepted", "Processing lag", "backup", "open", "app"},
		"messages":       {"Message id"},
		"rejected":       {"bad_signature", "postscale"},
		"quarantine":     {"Nothing is quarantined"},
		"sinks":          {"backup", "open", domain.TypeStatusChanged},
		"suppressions":   {"u***@example.com", "hard_bounce"},
		"reconciliation": {"email.bounced", "Total"},
		"erasures":       {"done", "e2e-operator"},
		"events":         {"evt_" + message + "_bounced", "email.bounced", "processed", "postscale"},
		// Before the console's own actions: the API's erasure, by the same token.
		"audit":      {"erasure", "e2e-operator", "api", "ok 200"},
		"auditAfter": {"sink.pause", "sink.resume", "sink.redeliver", "rejection.retry", "redrive", "suppression.lift", "console"},
	}
	for name, texts := range want {
		p, ok := run.Pages[name]
		if !ok {
			t.Errorf("page %s not visited", name)
			continue
		}
		if p.Status != 200 || p.Actor != "e2e-operator" || !strings.Contains(p.CSP, "default-src 'self'") {
			t.Errorf("page %s: %d, actor %q, CSP %q", name, p.Status, p.Actor, p.CSP)
		}
		for _, s := range texts {
			if !strings.Contains(p.Text, s) {
				t.Errorf("page %s does not show %q:\n%s", name, s, p.Text)
			}
		}
	}
	if strings.Contains(run.Pages["suppressions"].Text, simulate.Recipient) {
		t.Error("the suppressions list shows an address whole")
	}
	// The Events page by recipient: the message's events (and no other); the erased address
	// finds nothing, on the Events page or the Messages page.
	for _, suffix := range []string{"_sent", "_delivered", "_opened", "_bounced"} {
		if !slices.Contains(run.EventsByRecipient, "evt_"+message+suffix) {
			t.Errorf("events by recipient: no evt_%s%s in %v", message, suffix, run.EventsByRecipient)
		}
	}
	if run.ErasedSearch != 0 || run.ErasedEvents != 0 {
		t.Errorf("the erased address found %d messages and %d events, want none", run.ErasedSearch, run.ErasedEvents)
	}
	// The message found by its recipient, the address masked in the list, then its timeline:
	// every event with what precedence did and the version after it, as the API's timeline says,
	// each sink's notifications, and each run linked into the Temporal UI.
	if !slices.Contains(run.ByRecipient, message) {
		t.Errorf("messages by recipient %v: no %s", run.ByRecipient, message)
	}
	if strings.Contains(run.ByRecipientText, simulate.Recipient) {
		t.Errorf("the recipient search's list shows the address whole:\n%s", run.ByRecipientText)
	}
	code, api := h.admin(http.MethodGet, "/v1/messages/postscale/"+message+"/timeline", "")
	if code != http.StatusOK {
		t.Fatalf("timeline: %d %v", code, api)
	}
	apiEvents, _ := api["events"].([]any)
	if len(run.Timeline.Events) != 4 || len(apiEvents) != 4 {
		t.Errorf("timeline: %d events on the page, %d in the API, want the lifecycle's 4", len(run.Timeline.Events), len(apiEvents))
	}
	for _, ae := range apiEvents {
		e := ae.(map[string]any)
		i := slices.IndexFunc(run.Timeline.Events, func(p struct {
			Event      string `json:"event"`
			Precedence string `json:"precedence"`
			Version    string `json:"version"`
		}) bool {
			return p.Event == e["event_id"]
		})
		if i < 0 {
			t.Errorf("timeline page: no event %v", e["event_id"])
			continue
		}
		p := run.Timeline.Events[i]
		version := ""
		if v, ok := e["version"].(float64); ok {
			version = fmt.Sprint(int64(v))
		}
		if p.Precedence != e["precedence"] || p.Precedence == "" || p.Precedence == "pending" || p.Version != version {
			t.Errorf("timeline page: event %s %s v%q, the API says %v v%q", p.Event, p.Precedence, p.Version, e["precedence"], version)
		}
		want := temporalUI + "/namespaces/default/workflows/" + url.PathEscape(e["workflow_id"].(string))
		if !slices.Contains(run.Timeline.WorkflowLinks, want) {
			t.Errorf("timeline page: no link %s in %v", want, run.Timeline.WorkflowLinks)
		}
	}
	var apiNotifications []string
	for _, as := range api["sinks"].([]any) {
		for _, n := range as.(map[string]any)["notifications"].([]any) {
			apiNotifications = append(apiNotifications, n.(map[string]any)["id"].(string))
		}
	}
	slices.Sort(apiNotifications)
	pageNotifications := slices.Sorted(slices.Values(run.Timeline.Notifications))
	if len(apiNotifications) == 0 || !slices.Equal(apiNotifications, pageNotifications) || !slices.Equal(run.Timeline.Sinks, []string{"app", "backup"}) {
		t.Errorf("timeline page: notifications %v of sinks %v, the API's %v", pageNotifications, run.Timeline.Sinks, apiNotifications)
	}

	// The message, found, with its events.
	m := run.Message
	if m.Status != "bounced" || m.Recipient != simulate.Recipient || len(m.Events) != 4 || m.Notifications == 0 {
		t.Errorf("message page: %+v, want bounced, its recipient whole, 4 events and its notifications", m)
	}
	for _, suffix := range []string{"_sent", "_delivered", "_opened", "_bounced"} {
		if !slices.Contains(m.Events, "evt_"+message+suffix) {
			t.Errorf("message page: no event evt_%s%s in %v", message, suffix, m.Events)
		}
	}
	// The erased address is on no page, its message's included.
	for name, p := range run.Pages {
		if p.Erased {
			t.Errorf("page %s shows the erased address", name)
		}
	}
	if p := run.Pages["erasedMessage"]; p.Status != 200 {
		t.Errorf("the erased address's message page: %d", p.Status)
	}
	// The redelivery: the dry run's count, then each id delivered once.
	if run.DryRun.Count != int64(failed) || !strings.Contains(run.DryRun.Notice, "Dry run") {
		t.Errorf("dry run: %+v, want %d", run.DryRun, failed)
	}
	if run.RedeliverStatus != 200 || !strings.Contains(run.RedeliverNotice, fmt.Sprintf("Redelivery: %d notifications", failed)) {
		t.Errorf("redelivery: %d %q", run.RedeliverStatus, run.RedeliverNotice)
	}
	h.waitDelivered(failed)
	h.waitQuery(failed, `SELECT count(*) FROM notifications WHERE sink = 'app' AND status = 'sent'`)
	got := map[string]bool{}
	for _, d := range h.sink.delivered() {
		got[d.ID] = true
	}
	for _, id := range failedIDs {
		if !got[id] {
			t.Errorf("notification %s not delivered after the redelivery", id)
		}
	}
	if len(got) != len(failedIDs) {
		t.Errorf("%d ids delivered, want the %d redelivered", len(got), len(failedIDs))
	}
	// Each console action recorded once in the audit trail, via the console, under the
	// signed-in token's name, with the status the page answered; the viewer's refused pause
	// (403 before any action, as the API's scope check) is not an action.
	wantActs := map[string]int{"pause": 200, "resume": 200, "retry": http.StatusConflict, "redrive": 200, "lift": 200}
	for a, st := range wantActs {
		if run.Acts[a] != st {
			t.Errorf("console action %s: %d, want %d", a, run.Acts[a], st)
		}
	}
	if len(run.RetryErrors) > 1 || (len(run.RetryErrors) == 1 && !strings.Contains(run.RetryErrors[0], "409")) {
		t.Errorf("the retry's page: the browser reported %v, want at most its 409", run.RetryErrors)
	}
	type auditRow struct {
		Action, Actor, Target string
		Status                int
		DryRun                bool
	}
	var trail []auditRow
	rows, err = h.db.Query(t.Context(), `SELECT action, actor, target, status, coalesce((params->>'dry_run')::bool, false) FROM audit_log WHERE via = 'console' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r auditRow
		if err := rows.Scan(&r.Action, &r.Actor, &r.Target, &r.Status, &r.DryRun); err != nil {
			t.Fatal(err)
		}
		trail = append(trail, r)
	}
	rows.Close()
	wantTrail := []auditRow{
		{Action: "sink.redeliver", Actor: "e2e-operator", Target: "app", Status: 200, DryRun: true},
		{Action: "sink.redeliver", Actor: "e2e-operator", Target: "app", Status: 200},
		{Action: "sink.pause", Actor: "e2e-operator", Target: "backup", Status: 200},
		{Action: "sink.resume", Actor: "e2e-operator", Target: "backup", Status: 200},
		{Action: "rejection.retry", Actor: "e2e-operator", Target: fmt.Sprint(h.query(`SELECT min(id) FROM rejected_requests`)), Status: http.StatusConflict},
		{Action: "redrive", Actor: "e2e-operator", Status: 200},
		{Action: "suppression.lift", Actor: "e2e-operator", Target: "scope:global", Status: 200},
	}
	if !slices.Equal(trail, wantTrail) {
		t.Errorf("the console's audit trail:\n%+v\nwant\n%+v", trail, wantTrail)
	}
	var consoleRows int
	for _, a := range run.Audit {
		if a.Via == "console" {
			consoleRows++
		}
	}
	if consoleRows != len(wantTrail) {
		t.Errorf("the Audit page shows %d console actions, want %d: %+v", consoleRows, len(wantTrail), run.Audit)
	}

	// Forged POSTs, sign-out.
	if run.Forged.NoCSRF != http.StatusForbidden || run.Forged.BadCSRF != http.StatusForbidden {
		t.Errorf("forged POSTs: %+v, want 403 each", run.Forged)
	}
	if st := h.sinkState("app"); st["paused"] == true {
		t.Error("a forged POST paused the sink")
	}
	if run.AfterSignOut != "/console/login" || run.AfterSignOutSinks != "/console/login" {
		t.Errorf("sign out: on %q, then the sinks page gave %q; want the sign-in page both times", run.AfterSignOut, run.AfterSignOutSinks)
	}
	if len(run.ConsoleErrors) > 0 {
		t.Errorf("the browser reported errors: %v", run.ConsoleErrors)
	}
	// A read-only token: no action button, and the action refused.
	actions := []string{"pause", "resume", "redeliver", "redeliver-dry-run", "retry", "redrive", "redrive-quarantined", "lift"}
	if len(run.Viewer.Pages) != len(wantMenu) {
		t.Errorf("read-only token visited %d pages, want %d", len(run.Viewer.Pages), len(wantMenu))
	}
	for name, p := range run.Viewer.Pages {
		for _, a := range p.Actions {
			if slices.Contains(actions, a) {
				t.Errorf("read-only token: page %s shows the %s button", name, a)
			}
		}
		if name == "erasures" {
			if p.Status != http.StatusForbidden {
				t.Errorf("read-only token: erasures %d, want 403 (no erasure scope)", p.Status)
			}
		} else if p.Status != 200 {
			t.Errorf("read-only token: page %s %d", name, p.Status)
		}
	}
	if slices.Contains(run.Viewer.Menu, "Erasures") {
		t.Errorf("read-only token: the menu %v lists Erasures", run.Viewer.Menu)
	}
	for _, a := range run.Viewer.CheckActions {
		if slices.Contains(actions, a) {
			t.Errorf("read-only token: the suppression check shows %s", a)
		}
	}
	if run.Viewer.PauseWithItsCSRF != http.StatusForbidden || !run.Viewer.PauseBody {
		t.Errorf("read-only token's pause with its own CSRF token: %d (names sinks:write: %v), want 403", run.Viewer.PauseWithItsCSRF, run.Viewer.PauseBody)
	}
}
