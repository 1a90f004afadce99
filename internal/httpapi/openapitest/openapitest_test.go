package openapitest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mailhook/mailhook/internal/httpapi/openapitest"
)

// recordingTB keeps the errors Validate reports instead of failing the test.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// answer is a handler that answers every request with status, content type and body.
func answer(status int, contentType, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mailhook"`)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
}

func TestValidateReportsWhatTheDocumentDoesNotSay(t *testing.T) {
	const js = "application/json; charset=utf-8"
	cases := []struct {
		name, method, target string
		token                bool
		next                 http.Handler
		want                 string // "" when no error is expected
	}{
		{"documented answer", "GET", "/healthz", false, answer(200, js, `{"status":"ok"}`), ""},
		{"escaped id", "GET", "/v1/messages/p/a%2Fb", true, answer(404, js, `{"error":"not found","reason":"message not found"}`), ""},
		{"401 without a token", "GET", "/v1/suppressions", false, answer(401, js, `{"error":"missing or invalid bearer token","reason":"x"}`), ""},
		{"unrouted path", "GET", "/v1/nothing-here", true, answer(404, js, `{"error":"not found","reason":"no such route"}`), ""},
		{"unrouted method", "PUT", "/webhooks/postscale", false, answer(404, js, `{"error":"not found","reason":"no such route"}`), ""},
		{"trailing-slash redirect", "GET", "/v1/suppressions/", true,
			http.RedirectHandler("/v1/suppressions", http.StatusMovedPermanently), "answered 301"},
		{"not covered", "GET", "/metrics", false, answer(200, "text/plain", "# HELP"), ""},

		{"undocumented route", "GET", "/v1/widgets", true, answer(200, js, `[]`), "no such operation"},
		{"undocumented method", "PUT", "/v1/suppressions/a@example.com", true, answer(200, js, `{}`), "no such operation"},
		{"gin's plain-text 404", "GET", "/v1/nothing-here", true, answer(404, "text/plain", "404 page not found"), "not the document's NotRouted"},
		{"unrouted 404 off schema", "GET", "/v1/nothing-here", true, answer(404, js, `{"error":"not found"}`), "reason"},
		{"error without a reason", "GET", "/v1/messages/p/m", true, answer(404, js, `{"error":"not found"}`), "reason"},
		{"undocumented status", "GET", "/healthz", false, answer(418, js, `{"error":"teapot"}`), "answered 418"},
		{"body off schema", "GET", "/healthz", false, answer(200, js, `{"status":"fine"}`), "not as documented"},
		{"undocumented field", "GET", "/v1/suppressions", true, answer(200, js, `{"suppressions":[],"next_after":"","total":0}`), "total"},
		{"wrong content type", "GET", "/healthz", false, answer(200, "text/html", `<p>ok</p>`), "text/html"},
		{"no body", "GET", "/readyz", false, answer(200, "", ""), "not as documented"},
		{"missing header", "GET", "/v1/suppressions", false,
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", js)
				w.WriteHeader(401)
				_, _ = w.Write([]byte(`{"error":"missing or invalid bearer token","reason":"x"}`))
			}), "WWW-Authenticate"},
		{"secured route open", "GET", "/v1/quarantine", false, answer(200, js, `{"events":[],"next_after":""}`), "without a bearer token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			h := openapitest.Validate(rec, c.next)
			req := httptest.NewRequest(c.method, c.target, strings.NewReader(""))
			if c.token {
				req.Header.Set("Authorization", "Bearer x")
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
			t.Logf("reported: %q", rec.errs)
			switch {
			case c.want == "" && len(rec.errs) > 0:
				t.Errorf("unexpected errors: %q", rec.errs)
			case c.want != "" && len(rec.errs) == 0:
				t.Errorf("no error, want one saying %q", c.want)
			case c.want != "" && !strings.Contains(strings.Join(rec.errs, "\n"), c.want):
				t.Errorf("errors %q do not say %q", rec.errs, c.want)
			}
			for _, e := range rec.errs {
				if !strings.Contains(e, c.method+" "+c.target) {
					t.Errorf("error does not name the request %s %s: %s", c.method, c.target, e)
				}
			}
		})
	}
}

// The answer reaches the client unchanged through the validator.
func TestValidatePassesTheAnswerThrough(t *testing.T) {
	rec := &recordingTB{TB: t}
	h := openapitest.Validate(rec, answer(503, "application/json", `{"error":"temporarily unavailable"}`))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
	if w.Code != 503 || w.Body.String() != `{"error":"temporarily unavailable"}` || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("got %d %q %q", w.Code, w.Header(), w.Body)
	}
	// The body is not a Readiness: reported, and still passed through.
	if len(rec.errs) != 1 {
		t.Errorf("errors: %q", rec.errs)
	}
}
