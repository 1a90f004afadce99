package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/redact"
	"github.com/mailhook/mailhook/internal/store"
)

// Messages reads a message's state and history.
type Messages interface {
	GetMessage(ctx context.Context, provider, messageID string) (store.Message, error)
}

func (s *Server) message(c *gin.Context) {
	m, err := s.Messages.GetMessage(c.Request.Context(), param(c, "provider"), param(c, "message_id"))
	switch {
	case errors.Is(err, domain.ErrNotFound):
		s.fail(c, refuse(kindNotFound, "message not found"))
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "get message", "provider", param(c, "provider"), "message_id", param(c, "message_id"), "error", err)
		s.unavailable(c)
	default:
		c.JSON(http.StatusOK, m)
	}
}

// maxAdminBody bounds the JSON body of an admin request.
const maxAdminBody = 64 << 10

// decodeBody decodes the request's JSON body strictly: an unknown field is an error, so a typo
// ("state" for "status") is refused rather than ignored.
func decodeBody(c *gin.Context, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(c.Writer, c.Request.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	return nil
}

// badBody is the answer to a body decodeBody refused: its innermost cause says what is wrong.
func badBody(err error) *apiError { return refuse(kindBadRequest, reasonOf(err)) }

// correctionRequest is the body of POST /v1/messages/:provider/:message_id/corrections.
type correctionRequest struct {
	Status domain.Status `json:"status"`
	Reason string        `json:"reason"`
}

// correct starts a correction: an operator event, processed by the same workflow as provider
// events, that sets the message's status over precedence (the one way to move it backwards).
// It answers 202 once Temporal has the event; the workflow applies and notifies it.
func (s *Server) correct(c *gin.Context) {
	ctx := c.Request.Context()
	prov, messageID, actor := param(c, "provider"), param(c, "message_id"), c.GetString(actorKey)
	var req correctionRequest
	note := noteAudit(c)
	note.target = prov + ":" + messageID
	if err := decodeBody(c, &req); err != nil {
		s.fail(c, badBody(err))
		return
	}
	req.Reason = strings.TrimSpace(req.Reason)
	note.params = map[string]any{"status": req.Status}
	if !req.Status.Known() {
		known := make([]string, len(domain.Statuses))
		for i, st := range domain.Statuses {
			known[i] = string(st)
		}
		s.fail(c, &apiError{kind: kindBadRequest, reason: fmt.Sprintf("unknown status %q", req.Status), known: known})
		return
	}
	if req.Reason == "" {
		s.fail(c, refuse(kindBadRequest, "reason is required: say why the status is corrected"))
		return
	}
	_, err := s.Messages.GetMessage(ctx, prov, messageID)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		s.fail(c, refuse(kindNotFound, "message not found"))
		return
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "correction: get message", "provider", prov, "message_id", messageID, "error", err)
		s.unavailable(c)
		return
	}
	raw, err := json.Marshal(domain.Correction{Status: req.Status, Reason: req.Reason, Actor: actor})
	if err != nil {
		s.fail(c, refuse(kindInternal, "could not encode the correction"))
		return
	}
	ev := domain.Event{
		Provider: prov, EventID: "correction-" + randomHex(16), Type: domain.CorrectionType,
		Kind: domain.KindCorrection, Status: req.Status, MessageID: messageID,
		// The store keeps microseconds; the workflow input carries the same instant.
		OccurredAt: s.Now().UTC().Truncate(time.Microsecond), Raw: raw,
	}
	// The correction is accepted like a webhook event: recorded first, then started.
	verdicts, err := s.Acceptor.Accept(ctx, []domain.Event{ev})
	switch {
	case err != nil:
		s.Log.WarnContext(c.Request.Context(), "correction: record", "workflow_id", ev.Key(), "error", err)
		s.unavailable(c)
		return
	case verdicts[0].Status == acceptance.Rejected:
		s.fail(c, refuse(kindBadRequest, reasonOf(verdicts[0].Err)))
		return
	}
	s.Log.InfoContext(c.Request.Context(), "correction accepted", "actor", actor, "provider", prov, "message_id", messageID,
		"status", req.Status, "reason", redact.Text(req.Reason), "event_id", ev.EventID, "workflow_id", ev.Key())
	note.ref, note.detail = "webhook_events:"+ev.Key(), map[string]any{"event_id": ev.EventID, "workflow_id": ev.Key(), "status": verdicts[0].Status}
	c.JSON(http.StatusAccepted, gin.H{"status": verdicts[0].Status, "event_id": ev.EventID, "workflow_id": ev.Key()})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
