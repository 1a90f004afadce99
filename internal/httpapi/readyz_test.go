package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/metrics"
)

// With acceptance through Temporal, /readyz stays 200 while PostgreSQL's check hangs (its ping
// waiting for a pool connection during an outage) and Temporal answers: a load balancer keeps
// sending. A clean CI run once saw one 503 here when the hung check used up the deadline the
// Temporal check shared with it.
func TestReadyzWhilePostgresHangsAndTemporalAnswers(t *testing.T) {
	s := &httpapi.Server{
		Metrics: metrics.New(), MaxBodyBytes: 1 << 20, Log: slog.New(slog.DiscardHandler),
		Ready: map[string]func(context.Context) error{
			"postgres": func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
			"temporal": func(ctx context.Context) error { return ctx.Err() },
		},
		NotRequired: map[string]bool{"postgres": true, "temporal": true},
		AnyOf:       []string{"postgres", "temporal"},
	}
	h := s.AdminHandler()
	// Several at once: the checks' order is a map's, so one request may not show it.
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			var body struct {
				Checks map[string]string `json:"checks"`
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != http.StatusOK || body.Checks["temporal"] != "ok" || body.Checks["postgres"] != "failed" {
				t.Errorf("/readyz with PostgreSQL hanging, Temporal up: %d %s, want 200, temporal ok, postgres failed", rec.Code, rec.Body)
			}
		})
	}
	wg.Wait()

	// Both failing is still 503.
	down := func(context.Context) error { return errors.New("down") }
	s.Ready["postgres"], s.Ready["temporal"] = down, down
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with both down: %d, want 503", rec.Code)
	}
}
