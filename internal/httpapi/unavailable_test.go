package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/store"
)

// suppressionsDown answers every call with the error a PostgreSQL outage gives.
type suppressionsDown struct{}

var errPostgresDown = errors.New("connection refused")

func (suppressionsDown) ListSuppressions(context.Context, store.SuppressionFilter) ([]store.Suppression, error) {
	return nil, errPostgresDown
}
func (suppressionsDown) AddressSuppressions(context.Context, string) ([]store.Suppression, error) {
	return nil, errPostgresDown
}
func (suppressionsDown) CheckSuppression(context.Context, string, string) (store.SuppressionCheck, error) {
	return store.SuppressionCheck{}, errPostgresDown
}
func (suppressionsDown) LiftSuppression(context.Context, string, string, string, string) (store.SuppressionLift, error) {
	return store.SuppressionLift{}, errPostgresDown
}

// Every 503 says when to come back, on /v1 as on webhooks.
func TestUnavailableAnswersCarryRetryAfter(t *testing.T) {
	s := &httpapi.Server{AdminTokens: map[string]string{"token-for-the-test": "ops"}, RetryAfter: 7 * time.Second,
		Suppressions: suppressionsDown{}}
	req := httptest.NewRequest(http.MethodGet, "/v1/suppressions", nil)
	req.Header.Set("Authorization", "Bearer token-for-the-test")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "7" {
		t.Fatalf("GET /v1/suppressions with PostgreSQL down: %d, Retry-After %q, body %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
}
