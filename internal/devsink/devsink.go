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

// Handler verifies and prints notifications to Out. Build it with New.
type Handler struct {
	Out io.Writer
	Log *slog.Logger
	Now func() time.Time

	scheme *signature.Standard // the sink's secret, decoded by New

	mu   sync.Mutex
	seen map[string]bool // notification ids, to mark the retries a sink must drop
}

// New builds a Handler that verifies with secret (the sink's whsec_<base64> secret) and prints
// to out; log nil means slog.Default. The secret is decoded here, so a bad one stops the command
// at start-up instead of refusing every notification with 401.
func New(secret string, out io.Writer, log *slog.Logger) (*Handler, error) {
	scheme, err := signature.NewStandard(secret, Tolerance)
	if err != nil {
		// The error says what is wrong, never the secret.
		return nil, fmt.Errorf("dev-sink: secret: %w", err)
	}
	return &Handler{Out: out, Log: log, scheme: scheme}, nil
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
	id := r.Header.Get(signature.HeaderWebhookID)
	if err := h.Receive("", id, r.Header.Get(signature.HeaderWebhookTimestamp), r.Header.Get(signature.HeaderWebhookSignature), body); err != nil {
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Receive verifies one notification and prints it; via names where it came from when not over
// HTTP (a NATS subject, a RabbitMQ queue). A bad signature is logged and returned.
func (h *Handler) Receive(via, id, timestamp, sig string, body []byte) error {
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	checked := "signature ok"
	if sig == "" && via != "" {
		checked = "unsigned (the broker sink has no secret)"
	} else if err := h.scheme.Verify(id, timestamp, sig, body, now()); err != nil {
		h.log().Warn("notification refused: bad signature (is the sink's secret the dev sink's?)", "id", id, "error", err)
		return err
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
	if via != "" {
		via = "  via " + via
	}
	fmt.Fprintf(h.Out, "notification %s  id %s  %s%s%s\n  %s\n", n.Type, id, checked, via, note, pretty.String())
	return nil
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}
