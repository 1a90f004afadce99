package console_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/console"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/internal/store"
)

const (
	adminToken    = "console-admin-token"
	readOnlyToken = "console-read-token"
	address       = "jane.doe@example.com"
)

// fakes stand in for PostgreSQL: the browser test (internal/e2e) drives the real wiring; these
// check the console's own rules fast (sessions, CSRF, scopes, masking, headers).
type fakeSinks struct{ paused map[string]bool }

func (f *fakeSinks) ListSinks(context.Context) ([]delivery.Sink, error) {
	return []delivery.Sink{{Name: "app", State: delivery.Open, Paused: f.paused["app"], Parked: 2}}, nil
}
func (f *fakeSinks) SinkByName(_ context.Context, name string) (delivery.Sink, error) {
	if name != "app" {
		return delivery.Sink{}, domain.ErrNotFound
	}
	return delivery.Sink{Name: "app"}, nil
}
func (f *fakeSinks) PauseSink(_ context.Context, name string, paused bool, _ string) (delivery.Sink, error) {
	f.paused[name] = paused
	return delivery.Sink{Name: name, Paused: paused}, nil
}
func (f *fakeSinks) Redeliver(_ context.Context, rf store.RedeliverFilter) (store.Redelivery, error) {
	if rf.DryRun {
		return store.Redelivery{Matched: 3}, nil
	}
	return store.Redelivery{Matched: 3, Requeued: 3}, nil
}
func (f *fakeSinks) ListSinkNotifications(context.Context, store.SinkNotificationFilter) ([]delivery.Notification, string, error) {
	return nil, "", nil
}

type fakeSuppressions struct{}

func (fakeSuppressions) ListSuppressions(context.Context, store.SuppressionFilter) ([]store.Suppression, error) {
	return []store.Suppression{{Address: address, Scope: "global", Reason: "hard_bounce"}}, nil
}
func (fakeSuppressions) AddressSuppressions(context.Context, string) ([]store.Suppression, error) {
	return []store.Suppression{{Address: address, Scope: "global", Reason: "hard_bounce"}}, nil
}
func (fakeSuppressions) CheckSuppression(_ context.Context, a, scope string) (store.SuppressionCheck, error) {
	return store.SuppressionCheck{Address: a, Scope: scope, Suppressed: true, Reasons: []string{"hard_bounce"}}, nil
}
func (fakeSuppressions) LiftSuppression(_ context.Context, a, scope, by, reason string) (store.SuppressionLift, error) {
	return store.SuppressionLift{Address: a, Scope: scope, LiftedBy: by, LiftReason: reason}, nil
}

type fakeMessages struct{}

func (fakeMessages) GetMessage(_ context.Context, p, id string) (store.Message, error) {
	if id != "msg_1" {
		return store.Message{}, domain.ErrNotFound
	}
	return store.Message{Provider: p, MessageID: id, Status: "bounced", Recipient: address,
		Events: []store.MessageEvent{{EventID: "evt_1", Type: "email.bounced"}}}, nil
}

type fakeQuarantine struct{}

func (fakeQuarantine) ListQuarantine(context.Context, store.QuarantineFilter) ([]store.QuarantinedEvent, string, error) {
	return nil, "", nil
}

func newConsole(t *testing.T, with ...func(*httpapi.Server)) (*httptest.Server, *fakeSinks) {
	t.Helper()
	return newConsoleOn(t, nil, with...)
}

// newConsoleOn is newConsole keeping its sign-outs in sessions (a real PostgreSQL: two consoles
// over one are two processes of one deployment); nil keeps them in the process.
func newConsoleOn(t *testing.T, sessions *store.Sessions, with ...func(*httpapi.Server)) (*httptest.Server, *fakeSinks) {
	t.Helper()
	sinks := &fakeSinks{paused: map[string]bool{}}
	api := &httpapi.Server{
		AdminTokens:  map[string]string{adminToken: "ops", readOnlyToken: "viewer"},
		TokenScopes:  map[string][]string{readOnlyToken: {domain.ScopeSinksRead, domain.ScopeMessagesRead, domain.ScopeReportsRead, domain.ScopeSuppressionsRead}},
		Messages:     fakeMessages{},
		Suppressions: fakeSuppressions{},
		Quarantine:   fakeQuarantine{},
		SinkStates:   sinks,
		Sinks:        []httpapi.SinkSettings{{Name: "app", Kind: "http"}},
		Endpoints:    map[string]httpapi.Endpoint{"postscale": {Name: "postscale", Provider: "postscale"}},
		Log:          slog.New(slog.DiscardHandler),
	}
	for _, f := range with {
		f(api)
	}
	none := func(context.Context, time.Time) ([]store.MinuteCount, bool, error) { return nil, false, nil }
	reads := console.Reads{
		AcceptedPerMinute: none, RejectedPerMinute: none,
		Unprocessed:          func(context.Context) (int64, bool, time.Time, error) { return 0, false, time.Time{}, nil },
		QuarantineCount:      func(context.Context) (int64, error) { return 0, nil },
		LatestProviderCounts: func(context.Context) ([]providercounts.Check, error) { return nil, nil },
		ErasureJobs:          func(context.Context, int) ([]domain.ErasureJob, error) { return nil, nil },
		ParkedByType: func(context.Context, string) (map[string]int64, error) {
			return map[string]int64{domain.TypeStatusChanged: 2}, nil
		},
	}
	if sessions != nil {
		reads.SignOut, reads.SignedOut = sessions.SignOut, sessions.SignedOut
	}
	con, err := console.New(api, reads, api.Log)
	if err != nil {
		t.Fatal(err)
	}
	api.Console = con
	srv := httptest.NewServer(api.AdminHandler())
	t.Cleanup(srv.Close)
	return srv, sinks
}

// browser is a client with a cookie jar that does not follow redirects.
func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func get(t *testing.T, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Post(u, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func signIn(t *testing.T, srv *httptest.Server, token string) (*http.Client, string) {
	t.Helper()
	c := browser(t)
	code, body, _ := get(t, c, srv.URL+"/console/login")
	m := csrfField.FindStringSubmatch(body)
	if code != 200 || m == nil {
		t.Fatalf("login page: %d", code)
	}
	code, _, h := post(t, c, srv.URL+"/console/login", url.Values{"csrf": {m[1]}, "token": {token}})
	if code != http.StatusSeeOther || h.Get("Location") != "/console" {
		t.Fatalf("sign in: %d %v", code, h)
	}
	ck := h.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/console"} {
		if !strings.Contains(strings.Join(h.Values("Set-Cookie"), "\n"), want) {
			t.Errorf("session cookie %q lacks %s", ck, want)
		}
	}
	_, body, _ = get(t, c, srv.URL+"/console/sinks")
	m = csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on the sinks page")
	}
	return c, m[1]
}

func TestEveryPageRendersForAnAdminAndSaysWhoIsSignedIn(t *testing.T) {
	srv, _ := newConsole(t)
	c, _ := signIn(t, srv, adminToken)
	for _, p := range []string{"/console", "/console/messages?provider=postscale&id=msg_1", "/console/rejected", "/console/quarantine",
		"/console/sinks", "/console/suppressions?address=" + url.QueryEscape(address), "/console/reconciliation", "/console/erasures"} {
		code, body, h := get(t, c, srv.URL+p)
		if code != 200 {
			t.Errorf("GET %s: %d\n%s", p, code, body)
			continue
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'none'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
		if !strings.Contains(body, `data-actor>ops<`) || strings.Contains(body, "<script") || strings.Contains(body, "style=") {
			t.Errorf("GET %s: no actor, or inline script/style", p)
		}
		wantWhole := strings.HasPrefix(p, "/console/messages")
		if strings.Contains(body, address) != wantWhole && !strings.HasPrefix(p, "/console/suppressions") {
			t.Errorf("GET %s: address whole = %v, want %v", p, strings.Contains(body, address), wantWhole)
		}
	}
	// The list masks; the checked address is in the lift form only (the operator typed it).
	_, body, _ := get(t, c, srv.URL+"/console/suppressions")
	if strings.Contains(body, address) || !strings.Contains(body, "j***@example.com") {
		t.Errorf("suppressions list: the address not masked")
	}
}

func TestSignedOutOrForgedRequestsAreRefused(t *testing.T) {
	srv, sinks := newConsole(t)
	anon := browser(t)
	if code, _, h := get(t, anon, srv.URL+"/console/sinks"); code != http.StatusSeeOther || h.Get("Location") != "/console/login?next=%2Fconsole%2Fsinks" {
		t.Errorf("signed out: %d %v, want a redirect to the sign-in, back to the page after it", code, h.Get("Location"))
	}
	if code, _, _ := post(t, anon, srv.URL+"/console/sinks/pause", url.Values{"sink": {"app"}}); code != http.StatusForbidden {
		t.Errorf("a POST without a session: %d, want 403", code)
	}
	// A wrong token does not sign in.
	c := browser(t)
	_, body, _ := get(t, c, srv.URL+"/console/login")
	tok := csrfField.FindStringSubmatch(body)[1]
	if code, _, _ := post(t, c, srv.URL+"/console/login", url.Values{"csrf": {tok}, "token": {"nope"}}); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	// A sign-in form without its cookie's token (another site's form) is refused.
	if code, _, _ := post(t, browser(t), srv.URL+"/console/login", url.Values{"csrf": {tok}, "token": {adminToken}}); code != http.StatusForbidden {
		t.Errorf("login CSRF: %d, want 403", code)
	}

	admin, csrf := signIn(t, srv, adminToken)
	for _, bad := range []url.Values{{"sink": {"app"}}, {"sink": {"app"}, "csrf": {"forged"}}} {
		if code, _, _ := post(t, admin, srv.URL+"/console/sinks/pause", bad); code != http.StatusForbidden {
			t.Errorf("POST with csrf %q: %d, want 403", bad.Get("csrf"), code)
		}
	}
	if sinks.paused["app"] {
		t.Fatal("a forged form paused the sink")
	}
	// Another session's token is not this one's.
	_, other := signIn(t, srv, adminToken)
	if code, _, _ := post(t, admin, srv.URL+"/console/sinks/pause", url.Values{"sink": {"app"}, "csrf": {other}}); code != http.StatusForbidden {
		t.Errorf("another session's CSRF token: %d, want 403", code)
	}
	if code, body, _ := post(t, admin, srv.URL+"/console/sinks/pause", url.Values{"sink": {"app"}, "csrf": {csrf}}); code != 200 || !sinks.paused["app"] {
		t.Fatalf("pause: %d\n%s", code, body)
	}
	// Unknown sink: the API's 404 and its reason.
	if code, body, _ := post(t, admin, srv.URL+"/console/sinks/resume", url.Values{"sink": {"nope"}, "csrf": {csrf}}); code != 404 || !strings.Contains(body, "no such sink") {
		t.Errorf("unknown sink: %d", code)
	}

	// Sign-out: the cookie no longer works, even replayed.
	jarCookies := admin.Jar.Cookies(mustURL(t, srv.URL+"/console"))
	if code, _, _ := post(t, admin, srv.URL+"/console/logout", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther {
		t.Fatalf("sign out: %d", code)
	}
	replay := browser(t)
	replay.Jar.SetCookies(mustURL(t, srv.URL+"/console"), jarCookies)
	if code, _, _ := get(t, replay, srv.URL+"/console/sinks"); code != http.StatusSeeOther {
		t.Errorf("the signed-out session's cookie replayed: %d, want the sign-in redirect", code)
	}
}

func TestAReadOnlyTokenSeesNoActionAndIsRefusedOne(t *testing.T) {
	srv, sinks := newConsole(t)
	c, csrf := signIn(t, srv, readOnlyToken)
	for _, p := range []string{"/console/sinks", "/console/rejected", "/console/quarantine", "/console/reconciliation", "/console/suppressions?address=" + url.QueryEscape(address)} {
		_, body, _ := get(t, c, srv.URL+p)
		for _, a := range []string{"pause", "resume", "redeliver", "redeliver-dry-run", "retry", "redrive", "redrive-quarantined", "lift"} {
			if strings.Contains(body, `data-action="`+a+`"`) {
				t.Errorf("%s shows the %s button to a read-only token", p, a)
			}
		}
	}
	if code, _, _ := get(t, c, srv.URL+"/console/erasures"); code != http.StatusForbidden {
		t.Errorf("erasures without the erasure scope: %d, want 403", code)
	}
	code, body, _ := get(t, c, srv.URL+"/console")
	if code != 200 {
		t.Errorf("the overview for a token with scopes: %d", code)
	}
	if strings.Contains(body, `href="/console/erasures"`) {
		t.Error("the menu lists a page the token may not see")
	}
	code, body, _ = post(t, c, srv.URL+"/console/sinks/pause", url.Values{"sink": {"app"}, "csrf": {csrf}})
	if code != http.StatusForbidden || !strings.Contains(body, "sinks:write") || sinks.paused["app"] {
		t.Errorf("a read-only token's pause: %d (paused %v), want 403 naming sinks:write", code, sinks.paused["app"])
	}
}

func TestRedeliveryShowsItsDryRunCountFirst(t *testing.T) {
	srv, _ := newConsole(t)
	c, csrf := signIn(t, srv, adminToken)
	_, body, _ := get(t, c, srv.URL+"/console/sinks")
	if strings.Contains(body, `data-action="redeliver"`) || !strings.Contains(body, `data-action="redeliver-dry-run"`) {
		t.Fatal("the sinks page offers the real redelivery before a dry run")
	}
	code, body, _ := post(t, c, srv.URL+"/console/sinks/redeliver", url.Values{"csrf": {csrf}, "sink": {"app"}, "status": {"failed"}, "dry_run": {"true"}})
	if code != 200 || !strings.Contains(body, `data-dry-run="3"`) || !strings.Contains(body, `data-action="redeliver"`) {
		t.Fatalf("dry run: %d\n%s", code, body)
	}
	code, body, _ = post(t, c, srv.URL+"/console/sinks/redeliver", url.Values{"csrf": {csrf}, "sink": {"app"}, "status": {"bogus"}})
	if code != 400 || !strings.Contains(body, "unknown status") {
		t.Errorf("a status the API refuses: %d", code)
	}
	if !bytes.Contains([]byte(body), []byte("data-error")) {
		t.Error("the refusal is not shown")
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Over TLS (here, or at a proxy that says so) the session cookie is Secure; over plain HTTP it
// cannot be, or the browser would never send it back.
func TestTheSessionCookieIsSecureOverTLS(t *testing.T) {
	srv, _ := newConsole(t)
	for _, proto := range []string{"", "https"} {
		c := browser(t)
		_, body, _ := get(t, c, srv.URL+"/console/login")
		form := url.Values{"csrf": {csrfField.FindStringSubmatch(body)[1]}, "token": {adminToken}}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/console/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var session string
		for _, ck := range resp.Header.Values("Set-Cookie") {
			if strings.HasPrefix(ck, "mailhook_console=") {
				session = ck
			}
		}
		if session == "" || strings.Contains(session, "; Secure") != (proto == "https") {
			t.Errorf("X-Forwarded-Proto %q: session cookie %q", proto, session)
		}
		if strings.Contains(session, adminToken) {
			t.Error("the cookie holds the token")
		}
	}
}

// When a count reads its bound of rows, the overview says "more than" and which minutes it
// could not count, rather than a total that is too small.
func TestTheOverviewSaysWhenACountWasCapped(t *testing.T) {
	api := &httpapi.Server{AdminTokens: map[string]string{adminToken: "ops"}, Log: slog.New(slog.DiscardHandler)}
	now := time.Now().UTC().Truncate(time.Minute)
	capped := func(context.Context, time.Time) ([]store.MinuteCount, bool, error) {
		return []store.MinuteCount{{Minute: now, Count: 30_000}, {Minute: now.Add(-time.Minute), Count: 20_000}}, true, nil
	}
	con, err := console.New(api, console.Reads{
		AcceptedPerMinute: capped, RejectedPerMinute: capped,
		Unprocessed: func(context.Context) (int64, bool, time.Time, error) {
			// An hour before the request, not before the minute: from the minute's start the lag
			// read "1h1m0s" when the request came as the next minute began (a CI run at 17:04:00).
			return store.MaxCounted, true, time.Now().Add(-time.Hour), nil
		},
		QuarantineCount:      func(context.Context) (int64, error) { return 0, nil },
		LatestProviderCounts: func(context.Context) ([]providercounts.Check, error) { return nil, nil },
	}, api.Log)
	if err != nil {
		t.Fatal(err)
	}
	api.Console = con
	srv := httptest.NewServer(api.AdminHandler())
	defer srv.Close()
	c, _ := signIn(t, srv, adminToken)
	_, body, _ := get(t, c, srv.URL+"/console")
	for _, want := range []string{`data-stat="accepted">&gt; 50000<`, "≥ 20000", "—", "more than 50000 events not processed yet", "1h0m"} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
}

func TestAuditFieldsAreSortedAndSkipEmptyValues(t *testing.T) {
	got := console.Fields(map[string]any{"status": []any{"failed"}, "dry_run": false, "since": nil, "provider": "", "sink": "app",
		"counts": map[string]any{"b": float64(2), "a": float64(1)}})
	if want := `counts={a=1, b=2}, sink="app", status=failed`; got != want {
		t.Errorf("fields: %q, want %q", got, want)
	}
}

func TestNextPageKeepsTheFilters(t *testing.T) {
	q := url.Values{"provider": {"postscale"}, "type": {""}, "after": {"old"}, "outcome": {"moved"}}
	if got, want := console.NextURL("/console/events", q, "abc"), "/console/events?after=abc&outcome=moved&provider=postscale"; got != want {
		t.Errorf("next: %q, want %q", got, want)
	}
	if got := console.NextURL("/console/events", q, ""); got != "" {
		t.Errorf("last page: next %q, want none", got)
	}
}

// fakeAudit keeps what the console records.
type fakeAudit struct{ entries []store.AuditEntry }

func (f *fakeAudit) RecordAudit(_ context.Context, e store.AuditEntry) (int64, error) {
	f.entries = append(f.entries, e)
	return int64(len(f.entries)), nil
}
func (f *fakeAudit) ListAudit(context.Context, store.AuditFilter) ([]store.AuditEntry, string, error) {
	return f.entries, "", nil
}
func (f *fakeAudit) AddressHash(string) string { return "h" }

// An action taken in the console is one audit entry via the console, under the token's name,
// with the status the API would answer: a refused one too.
func TestConsoleActionsAreAudited(t *testing.T) {
	audit := &fakeAudit{}
	srv, sinks := newConsole(t, func(s *httpapi.Server) { s.Audit = audit })
	c, csrf := signIn(t, srv, adminToken)
	if code, _, _ := post(t, c, srv.URL+"/console/sinks/pause", url.Values{"csrf": {csrf}, "sink": {"app"}}); code != 200 || !sinks.paused["app"] {
		t.Fatalf("pause: %d", code)
	}
	if code, _, _ := post(t, c, srv.URL+"/console/sinks/resume", url.Values{"csrf": {csrf}, "sink": {"nope"}}); code != http.StatusNotFound {
		t.Fatalf("resume of no sink: %d, want 404", code)
	}
	want := []store.AuditEntry{
		{Action: store.AuditSinkPause, Actor: "ops", Via: store.AuditViaConsole, Status: 200, Target: "app"},
		{Action: store.AuditSinkResume, Actor: "ops", Via: store.AuditViaConsole, Status: 404, Target: "nope"},
	}
	if len(audit.entries) != len(want) {
		t.Fatalf("audit entries %+v, want %+v", audit.entries, want)
	}
	for i, e := range audit.entries {
		w := want[i]
		if e.Action != w.Action || e.Actor != w.Actor || e.Via != w.Via || e.Status != w.Status || e.Target != w.Target {
			t.Errorf("audit entry %d: %+v, want %+v", i, e, w)
		}
	}
	// A form the console refuses before any action (no CSRF token) is no entry.
	post(t, c, srv.URL+"/console/sinks/pause", url.Values{"sink": {"app"}})
	if len(audit.entries) != 2 {
		t.Errorf("a forged POST was audited: %+v", audit.entries[2:])
	}
}
