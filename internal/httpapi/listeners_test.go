package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/metrics"
)

// With http.admin_address the internet-facing listener answers only what providers call, and
// the admin listener everything else; Handler serves both on one.
func TestPublicAndAdminHandlersSplitTheRoutes(t *testing.T) {
	s := &httpapi.Server{AdminTokens: map[string]string{"token-for-the-test": "ops"}, Metrics: metrics.New(), MaxBodyBytes: 1 << 20}
	get := func(h http.Handler, method, path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader("{}")))
		return rec.Code
	}
	public, admin, all := s.PublicHandler(), s.AdminHandler(), s.Handler()
	cases := []struct {
		method, path       string
		public, admin, all int
	}{
		{http.MethodGet, "/healthz", 200, 200, 200},
		{http.MethodPost, "/webhooks/nope", 404, 404, 404}, // unknown endpoint (JSON) vs no route
		{http.MethodGet, "/v1/suppressions", 404, 401, 401},
		{http.MethodGet, "/v1/openapi.json", 404, 200, 200},
		{http.MethodGet, "/metrics", 404, 200, 200},
		{http.MethodGet, "/readyz", 404, 200, 200},
	}
	for _, c := range cases {
		if got := get(public, c.method, c.path); got != c.public {
			t.Errorf("public %s %s: %d, want %d", c.method, c.path, got, c.public)
		}
		if got := get(admin, c.method, c.path); got != c.admin {
			t.Errorf("admin %s %s: %d, want %d", c.method, c.path, got, c.admin)
		}
		if got := get(all, c.method, c.path); got != c.all {
			t.Errorf("one listener %s %s: %d, want %d", c.method, c.path, got, c.all)
		}
	}
	// The webhook route exists only on the public side: its 404 is the handler's JSON.
	rec := httptest.NewRecorder()
	public.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhooks/nope", strings.NewReader("{}")))
	if !strings.Contains(rec.Body.String(), "unknown endpoint") {
		t.Errorf("public webhook 404 body %q", rec.Body.String())
	}
	rec = httptest.NewRecorder()
	admin.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhooks/nope", strings.NewReader("{}")))
	if strings.Contains(rec.Body.String(), "unknown endpoint") {
		t.Error("the admin listener routes webhooks")
	}
}
