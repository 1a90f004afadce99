package httpapi_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/httpapi"
)

// An erasure is logged by the actor and the address's hash: neither the address nor the reason
// (which may name the person) reaches the log, whatever the answer. (The answer's reason is
// redacted by the store: TestEraseLeavesNoTraceAndKeepsTheSuppression.)
func TestEraseLogsNoAddress(t *testing.T) {
	var logs bytes.Buffer
	s := &httpapi.Server{
		Erasures:    &fakeBackend{},
		AdminTokens: map[string]string{contractToken: "ops"},
		Log:         slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	h := s.Handler()
	for _, body := range []string{
		`{"address":"Jane.Private@example.com","reason":"jane.private@example.com asked on the phone"}`,
		`{"address":"down@example.com","reason":"down@example.com asked"}`,
		`{"address":"unconfigured@example.com","reason":"asked"}`,
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/erasures", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+contractToken)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	out := strings.ToLower(logs.String())
	if !strings.Contains(out, `"msg":"address erased"`) || !strings.Contains(out, "erased:hmac-sha256:") {
		t.Fatalf("no erasure logged by its hash: %s", out)
	}
	for _, secret := range []string{"jane.private", "down@example.com", "asked"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q: %s", secret, out)
		}
	}
}
