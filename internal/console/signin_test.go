package console_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/console"
	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// A sign-out holds in every process: a cookie copied before it, accepted by a second process of
// the same deployment (same tokens, same database), is refused there afterwards, and by the first.
func TestASignOutHoldsInEveryProcess(t *testing.T) {
	st := storetest.Open(t)
	a, _ := newConsoleOn(t, st.Sessions)
	b, _ := newConsoleOn(t, st.Sessions)
	admin, csrf := signIn(t, a, adminToken)
	copied := admin.Jar.Cookies(mustURL(t, a.URL+"/console"))
	other := browser(t)
	other.Jar.SetCookies(mustURL(t, b.URL+"/console"), copied)
	if code, _, _ := get(t, other, b.URL+"/console/sinks"); code != http.StatusOK {
		t.Fatalf("the cookie in the second process before the sign-out: %d, want 200", code)
	}
	if code, _, _ := post(t, admin, a.URL+"/console/logout", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther {
		t.Fatalf("sign out: %d", code)
	}
	for name, srv := range map[string]string{"the second process": b.URL, "the first process": a.URL} {
		replay := browser(t)
		replay.Jar.SetCookies(mustURL(t, srv+"/console"), copied)
		if code, _, h := get(t, replay, srv+"/console/sinks"); code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/login?") {
			t.Errorf("the signed-out cookie in %s: %d %q, want the sign-in redirect", name, code, h.Get("Location"))
		}
	}
	// A new sign-in is a new session, untouched by the old one's sign-out.
	if _, _ = signIn(t, b, adminToken); t.Failed() {
		t.Fatal("signing in again failed")
	}
}

// tryToken posts token on a fresh sign-in form from the client address from (the proxy's
// X-Forwarded-For) and returns the answer.
func tryToken(t *testing.T, srv, from, token string) (int, http.Header) {
	t.Helper()
	c := browser(t)
	req, _ := http.NewRequest(http.MethodGet, srv+"/console/login", nil)
	req.Header.Set("X-Forwarded-For", from)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	m := csrfField.FindStringSubmatch(readAll(t, resp))
	if m == nil {
		t.Fatalf("no sign-in form (%d)", resp.StatusCode)
	}
	form := url.Values{"csrf": {m[1]}, "token": {token}}
	req, _ = http.NewRequest(http.MethodPost, srv+"/console/login", stringsReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", from)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	return resp.StatusCode, resp.Header
}

// Failed sign-ins are limited per client address (behind a trusted proxy, the address it names):
// after the burst the address is refused 429 with Retry-After, its right token too, while
// another address still signs in.
func TestFailedSignInsAreLimitedPerAddress(t *testing.T) {
	srv, _ := newConsole(t, func(s *httpapi.Server) { s.TrustedProxies = []string{"127.0.0.1"} })
	const guesser = "203.0.113.7"
	for i := range console.SignInBurst {
		if code, _ := tryToken(t, srv.URL, guesser, fmt.Sprint("guess-", i)); code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, code)
		}
	}
	code, h := tryToken(t, srv.URL, guesser, "guess-again")
	if code != http.StatusTooManyRequests {
		t.Fatalf("guess past the burst: %d, want 429", code)
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want seconds", h.Get("Retry-After"))
	}
	if code, _ := tryToken(t, srv.URL, guesser, adminToken); code != http.StatusTooManyRequests {
		t.Errorf("the right token from the limited address: %d, want 429 (a guess that happens to be right is not let through)", code)
	}
	if code, h := tryToken(t, srv.URL, "198.51.100.20", adminToken); code != http.StatusSeeOther || h.Get("Location") != "/console" {
		t.Errorf("another address with the right token: %d %q, want signed in", code, h.Get("Location"))
	}
	// A successful sign-in costs no try: an address that signs in again and again is never limited.
	for i := range console.SignInBurst + 2 {
		if code, _ := tryToken(t, srv.URL, "198.51.100.21", adminToken); code != http.StatusSeeOther {
			t.Fatalf("sign-in %d from one address: %d, want 303", i, code)
		}
	}
}

// Under a flood of failures from distinct addresses the limiter keeps a bounded table, and the
// addresses it cannot track share one limit: the flood gets about one address's tries, not one
// per address.
func TestTheSignInLimitIsBoundedUnderDistinctAddresses(t *testing.T) {
	l := console.NewSignInLimiter()
	now := time.Unix(1_800_000_000, 0)
	let := 0
	const flood = 3 * console.SignInAddresses
	for i := range flood {
		if l.Reserve(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), now) {
			let++
		}
	}
	if n := l.Tracked(); n > console.SignInAddresses {
		t.Errorf("%d addresses tracked, want at most %d", n, console.SignInAddresses)
	}
	// Every tracked address got its burst's first try; those past the table shared one burst.
	if want := console.SignInAddresses + console.SignInBurst; let != want {
		t.Errorf("%d of %d tries let through, want %d", let, flood, want)
	}
	// Once the tracked addresses have been quiet long enough to be back at the full burst, they
	// are forgotten and new ones are tracked again.
	later := now.Add(console.SignInIdleAfter)
	if !l.Reserve("192.0.2.1", later) {
		t.Error("a new address once the old ones are idle: refused")
	}
	if n := l.Tracked(); n != 1 {
		t.Errorf("%d tracked after the idle ones were forgotten, want 1", n)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

// A sign-in returns to the page that asked for it, and only to a console page: a link sent to
// an operator opens where it points, and the parameter sends no browser to another site.
func TestSignInReturnsToThePageAskedFor(t *testing.T) {
	srv, _ := newConsole(t)
	c := browser(t)
	code, _, h := get(t, c, srv.URL+"/console/messages?recipient=user%40example.com")
	if code != http.StatusSeeOther {
		t.Fatalf("signed out: %d", code)
	}
	for _, tc := range []struct{ next, want string }{
		{"/console/messages?recipient=user%40example.com", "/console/messages?recipient=user%40example.com"},
		{"https://evil.example/console", "/console"},
		{"//evil.example/console", "/console"},
		{"/\\evil.example/console", "/console"},
		{"/other", "/console"},
		{"/console/logout", "/console"},
	} {
		_, body, _ := get(t, c, srv.URL+h.Get("Location"))
		m := csrfField.FindStringSubmatch(body)
		if m == nil {
			t.Fatal("no sign-in form")
		}
		code, _, got := post(t, c, srv.URL+"/console/login", url.Values{"csrf": {m[1]}, "token": {adminToken}, "next": {tc.next}})
		if code != http.StatusSeeOther || got.Get("Location") != tc.want {
			t.Errorf("next %q: %d to %q, want %q", tc.next, code, got.Get("Location"), tc.want)
		}
		c = browser(t)
	}
	// The form carries the page asked for.
	_, body, _ := get(t, browser(t), srv.URL+h.Get("Location"))
	if !strings.Contains(body, `name="next" value="/console/messages?recipient=user%40example.com"`) {
		t.Errorf("the sign-in form does not carry the page asked for:\n%s", body)
	}
}
