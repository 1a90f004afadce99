// Package devsink is a notification receiver for development (`mailhook dev-sink`): it verifies
// each notification's Standard Webhooks signature, as a real sink must, and prints it, so a first
// run of `make run` and `mailhook simulate` ends in visible notifications.
package devsink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/mailhook/mailhook/internal/signature"
)

// Tolerance is how old a notification's signature may be; mailhook signs each attempt afresh.
const Tolerance = 5 * time.Minute

// maxBody bounds a notification (an inbound email's notification carries its body).
const maxBody = 4 << 20

// Handler verifies and prints notifications to out. Secret is the sink's configured secret.
type Handler struct {
	Secret string
	Out    io.Writer
	Log    *slog.Logger
	Now    func() time.Time

	// The secret is decoded once, on the first request: Handler is built as a literal.
	schemeOnce sync.Once
	scheme     *signature.Standard
	schemeErr  error

	mu   sync.Mutex
	seen map[string]bool // notification ids, to mark the retries a sink must drop
}

func (h *Handler) verify(id, timestamp, sig string, body []byte, now time.Time) error {
	h.schemeOnce.Do(func() { h.scheme, h.schemeErr = signature.NewStandard(h.Secret, Tolerance) })
	if h.schemeErr != nil {
		return h.schemeErr
	}
	return h.scheme.Verify(id, timestamp, sig, body, now)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST notifications here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "could not read body", http.StatusBadRequest)
		return
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	id := r.Header.Get(signature.HeaderWebhookID)
	if err := h.verify(id, r.Header.Get(signature.HeaderWebhookTimestamp),
		r.Header.Get(signature.HeaderWebhookSignature), body, now()); err != nil {
		h.log().Warn("notification refused: bad signature (is the sink's secret the dev sink's?)", "id", id, "error", err)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	h.mu.Lock()
	if h.seen == nil {
		h.seen = map[string]bool{}
	}
	repeat := h.seen[id]
	h.seen[id] = true
	h.mu.Unlock()

	var n struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(body, &n)
	var pretty bytes.Buffer
	if json.Indent(&pretty, n.Data, "  ", "  ") != nil {
		pretty.Reset()
		pretty.Write(n.Data)
	}
	note := ""
	if repeat {
		note = " (a retry of one already received: a real sink drops it by this id)"
	}
	fmt.Fprintf(h.Out, "notification %s  id %s  signature ok%s\n  %s\n", n.Type, id, note, pretty.String())
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}
