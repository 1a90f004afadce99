package httpapi_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/httpapi/openapitest"
	"github.com/mailhook/mailhook/internal/mailaddr"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/suppression"
)

const contractToken = "contract-test-admin-token"

// scopedToken is the contract fixture's token that holds scope alone.
func scopedToken(scope string) string { return "contract-token-" + scope }

func TestOpenAPIDocumentLoadsAndValidates(t *testing.T) {
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(httpapi.OpenAPIDocument())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(ctx, openapi3.EnableExamplesValidation()); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" || !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	ids := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "" || ids[op.OperationID] {
				t.Errorf("%s %s: operationId %q missing or repeated", method, path, op.OperationID)
			}
			ids[op.OperationID] = true
			public := op.Security != nil && len(*op.Security) == 0
			if strings.HasPrefix(path, "/v1/") && !public && op.Responses.Status(http.StatusUnauthorized) == nil {
				t.Errorf("%s %s needs the token but documents no 401", method, path)
			}
			if !strings.HasPrefix(path, "/v1/") && !public {
				t.Errorf("%s %s is outside /v1 but documented as needing the admin token", method, path)
			}
		}
	}
}

func TestOpenAPIDocumentIsServedWithoutToken(t *testing.T) {
	f := newContractFixture(t)
	req := httptest.NewRequest(http.MethodGet, httpapi.OpenAPIPath, nil)
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s without a token: %d %s", httpapi.OpenAPIPath, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if !bytes.Equal(rec.Body.Bytes(), httpapi.OpenAPIDocument()) {
		t.Error("the served document is not the embedded one")
	}
}

// TestEveryRouteAnswersAsDocumented drives every documented operation through the real handlers
// (over fake stores) into each status the document lists, and holds each answer to the document
// (openapitest.Validate). The end-to-end tests do the same against PostgreSQL and Temporal, for
// the answers they reach.
func TestEveryRouteAnswersAsDocumented(t *testing.T) {
	f := newContractFixture(t)
	token := map[string]string{"Authorization": "Bearer " + contractToken}
	cases := []struct {
		method, target string
		header         map[string]string
		body           string
		bodyReader     io.Reader // instead of body, sent with an unknown length
		want           int
	}{
		// Health and the document.
		{method: "GET", target: "/healthz", want: 200},
		{method: "GET", target: "/readyz", want: 200},
		{method: "GET", target: "/readyz", header: map[string]string{"X-Fail": "postgres"}, want: 503},
		{method: "GET", target: "/v1/openapi.json", want: 200},

		// Webhooks.
		{method: "POST", target: "/webhooks/plain", body: "events:e1", want: 200},
		{method: "POST", target: "/webhooks/plain", body: "events:dup1", want: 200},
		{method: "POST", target: "/webhooks/plain", body: "events:e1,dup2,bad3", want: 200},
		{method: "POST", target: "/webhooks/plain", body: "events:dup1,dup2", want: 200},
		{method: "POST", target: "/webhooks/sns", body: "control:ok", want: 200},
		{method: "POST", target: "/webhooks/sns", body: "control:bad", want: 400},
		{method: "POST", target: "/webhooks/sns", body: "control:down", want: 503},
		{method: "POST", target: "/webhooks/plain", body: "garbage", want: 400},
		{method: "POST", target: "/webhooks/plain", body: "events:", want: 400},
		{method: "POST", target: "/webhooks/plain", body: "events:bad1", want: 400},
		{method: "POST", target: "/webhooks/plain", bodyReader: errReader{errors.New("connection reset")}, want: 400},
		{method: "POST", target: "/webhooks/plain", body: "unsigned", want: 401},
		{method: "POST", target: "/webhooks/nonce", header: map[string]string{"X-Nonce": "used"}, body: "events:e2", want: 406},
		{method: "POST", target: "/webhooks/nonce", body: "unsigned", want: 406},
		// Refused by allow_cidrs before its body is read: the provider's own "stop" status too.
		{method: "POST", target: "/webhooks/fenced", body: "events:e5", want: 406},
		{method: "POST", target: "/webhooks/nonce", header: map[string]string{"X-Nonce": "fresh"}, body: "events:e3", want: 200},
		{method: "POST", target: "/webhooks/nonce", header: map[string]string{"X-Nonce": "down"}, body: "events:e4", want: 503},
		{method: "POST", target: "/webhooks/unknown", body: "events:e1", want: 404},
		{method: "POST", target: "/webhooks/plain", bodyReader: errReader{os.ErrDeadlineExceeded}, want: 408},
		{method: "POST", target: "/webhooks/plain", body: strings.Repeat("x", 2048), want: 413},
		{method: "POST", target: "/webhooks/plain", bodyReader: strings.NewReader(strings.Repeat("x", 2048)), want: 413},
		{method: "POST", target: "/webhooks/plain", body: "events:e1,e2,e3,e4", want: 413},
		{method: "POST", target: "/webhooks/plain", body: "verify-later", want: 503},
		{method: "POST", target: "/webhooks/plain", body: "events:down1", want: 503},

		// Messages and corrections.
		{method: "GET", target: "/v1/messages/postscale/msg_1", header: token, want: 200},
		{method: "GET", target: "/v1/messages/postscale/a%2Fb+c", header: token, want: 200},
		{method: "GET", target: "/v1/messages/postscale/fresh", header: token, want: 200},
		{method: "GET", target: "/v1/messages/postscale/missing", header: token, want: 404},
		{method: "GET", target: "/v1/messages/postscale/down", header: token, want: 503},
		{method: "POST", target: "/v1/messages/postscale/msg_1/corrections", header: token, body: `{"status":"delivered","reason":"wrong DSN"}`, want: 202},
		{method: "POST", target: "/v1/messages/postscale/msg_1/corrections", header: token, body: `{"state":"delivered"}`, want: 400},
		{method: "POST", target: "/v1/messages/postscale/msg_1/corrections", header: token, body: `{"status":"lost","reason":"x"}`, want: 400},
		{method: "POST", target: "/v1/messages/postscale/msg_1/corrections", header: token, body: `{"status":"delivered","reason":" "}`, want: 400},
		{method: "POST", target: "/v1/messages/postscale/reject-me/corrections", header: token, body: `{"status":"delivered","reason":"x"}`, want: 400},
		{method: "POST", target: "/v1/messages/postscale/missing/corrections", header: token, body: `{"status":"delivered","reason":"x"}`, want: 404},
		{method: "POST", target: "/v1/messages/postscale/down/corrections", header: token, body: `{"status":"delivered","reason":"x"}`, want: 503},
		{method: "POST", target: "/v1/messages/postscale/accept-down/corrections", header: token, body: `{"status":"delivered","reason":"x"}`, want: 503},

		// Suppressions.
		{method: "GET", target: "/v1/suppressions", header: token, want: 200},
		{method: "GET", target: "/v1/suppressions?reason=hard_bounce&limit=1", header: token, want: 200},
		{method: "GET", target: "/v1/suppressions?after=zzz", header: token, want: 200},
		{method: "GET", target: "/v1/suppressions?reason=bored", header: token, want: 400},
		{method: "GET", target: "/v1/suppressions?limit=0", header: token, want: 400},
		{method: "GET", target: "/v1/suppressions?after=down", header: token, want: 503},
		{method: "GET", target: "/v1/suppressions/a%2Bb%40example.com", header: token, want: 200},
		{method: "GET", target: "/v1/suppressions/missing@example.com", header: token, want: 404},
		{method: "GET", target: "/v1/suppressions/down@example.com", header: token, want: 503},
		{method: "DELETE", target: "/v1/suppressions/user@example.com", header: token, body: `{"reason":"asked to be mailed"}`, want: 200},
		{method: "DELETE", target: "/v1/suppressions/user@example.com", header: token, body: `{}`, want: 400},
		{method: "DELETE", target: "/v1/suppressions/user@example.com", header: token, body: `not json`, want: 400},
		{method: "DELETE", target: "/v1/suppressions/missing@example.com", header: token, body: `{"reason":"x"}`, want: 404},
		{method: "DELETE", target: "/v1/suppressions/down@example.com", header: token, body: `{"reason":"x"}`, want: 503},
		{method: "GET", target: "/v1/suppressions?scope=marketing", header: token, want: 200},
		{method: "GET", target: "/v1/suppressions?scope=global&reason=unsubscribe", header: token, want: 200},
		{method: "GET", target: "/v1/suppressions?scope=Marketing", header: token, want: 400},
		{method: "DELETE", target: "/v1/suppressions/user@example.com?scope=marketing", header: token, body: `{"reason":"asked to be mailed"}`, want: 200},
		{method: "DELETE", target: "/v1/suppressions/user@example.com?scope=no%20such", header: token, body: `{"reason":"x"}`, want: 400},
		{method: "GET", target: "/v1/suppressions/check?address=user@example.com", header: token, want: 200},
		{method: "GET", target: "/v1/suppressions/check?address=a+b@example.com&scope=marketing", header: token, want: 200},
		{method: "GET", target: "/v1/suppressions/check?address=nobody@example.com&scope=global", header: token, want: 200},
		{method: "GET", target: "/v1/suppressions/check", header: token, want: 400},
		{method: "GET", target: "/v1/suppressions/check?address=user@example.com&scope=../x", header: token, want: 400},
		{method: "GET", target: "/v1/suppressions/check?address=down@example.com", header: token, want: 503},
		{method: "GET", target: "/v1/suppressions/checker@example.com", header: token, want: 200},

		// Refused webhook requests kept.
		{method: "GET", target: "/v1/rejections", header: token, want: 200},
		{method: "GET", target: "/v1/rejections?endpoint=empty&cause=bad_signature", header: token, want: 200},
		{method: "GET", target: "/v1/rejections?cause=nonsense", header: token, want: 400},
		{method: "GET", target: "/v1/rejections?after=bad", header: token, want: 400},
		{method: "GET", target: "/v1/rejections?endpoint=down", header: token, want: 503},
		{method: "GET", target: "/v1/rejections/1", header: token, want: 200},
		{method: "GET", target: "/v1/rejections/2", header: token, want: 200},
		{method: "GET", target: "/v1/rejections/x", header: token, want: 400},
		{method: "GET", target: "/v1/rejections/404", header: token, want: 404},
		{method: "GET", target: "/v1/rejections/503", header: token, want: 503},
		{method: "POST", target: "/v1/rejections/3/retry", header: token, want: 200},
		{method: "POST", target: "/v1/rejections/4/retry", header: token, want: 409},
		{method: "POST", target: "/v1/rejections/1/retry", header: token, want: 409},
		{method: "POST", target: "/v1/rejections/2/retry", header: token, want: 409},
		{method: "POST", target: "/v1/rejections/x/retry", header: token, want: 400},
		{method: "POST", target: "/v1/rejections/404/retry", header: token, want: 404},
		{method: "POST", target: "/v1/rejections/503/retry", header: token, want: 503},

		// Quarantine, report, replay, redrive.
		{method: "GET", target: "/v1/quarantine", header: token, want: 200},
		{method: "GET", target: "/v1/quarantine?provider=empty", header: token, want: 200},
		{method: "GET", target: "/v1/quarantine?limit=x", header: token, want: 400},
		{method: "GET", target: "/v1/quarantine?after=bad", header: token, want: 400},
		{method: "GET", target: "/v1/quarantine?provider=down", header: token, want: 503},
		{method: "GET", target: "/v1/reports/daily", header: token, want: 200},
		{method: "GET", target: "/v1/reports/daily?date=2026-01-02&provider=postscale", header: token, want: 200},
		{method: "GET", target: "/v1/reports/daily?date=yesterday", header: token, want: 400},
		{method: "GET", target: "/v1/reports/daily?provider=down", header: token, want: 503},
		{method: "POST", target: "/v1/events/postscale/evt_1/replay", header: token, want: 202},
		{method: "POST", target: "/v1/events/postscale/waited/replay", header: token, body: `{"renotify":true}`, want: 202},
		{method: "POST", target: "/v1/events/postscale/evt_1/replay", header: token, body: `{"renotfy":true}`, want: 400},
		{method: "POST", target: "/v1/events/postscale/missing/replay", header: token, want: 404},
		{method: "POST", target: "/v1/events/postscale/old/replay", header: token, want: 409},
		{method: "POST", target: "/v1/events/postscale/down/replay", header: token, want: 503},
		{method: "POST", target: "/v1/redrive", header: token, want: 200},
		{method: "POST", target: "/v1/redrive", header: token, body: `{"older_than":"0s","quarantined":true,"limit":1}`, want: 200},
		{method: "POST", target: "/v1/redrive", header: token, body: `{"older_than":"soon"}`, want: 400},
		{method: "POST", target: "/v1/redrive", header: token, body: `{"limit":1001}`, want: 400},
		{method: "POST", target: "/v1/redrive", header: token, body: `{"limit":13}`, want: 503},

		// Erasure.
		{method: "POST", target: "/v1/erasures", header: token, body: `{"address":"Jane@Example.com","reason":"art. 17 request"}`, want: 200},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"address":"gone@example.com","reason":"asked twice"}`, want: 200},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"address":"jane@example.com"}`, want: 400},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"reason":"x"}`, want: 400},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"adress":"jane@example.com","reason":"x"}`, want: 400},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"address":"example.com","reason":"x"}`, want: 400},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"address":"unconfigured@example.com","reason":"x"}`, want: 409},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"address":"down@example.com","reason":"x"}`, want: 503},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"address":"support@example.com","reason":"x"}`, want: 409},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"address":"support@example.com","reason":"x","dry_run":true}`, want: 200},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"address":"support@example.com","reason":"x","scope":"inbound"}`, want: 200},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"address":"support@example.com","reason":"x","force":true}`, want: 200},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"address":"jane@example.com","reason":"x","scope":"everything"}`, want: 400},
		{method: "POST", target: "/v1/erasures", header: token, body: `{"address":"slow@example.com","reason":"a large database"}`, want: 202},
		{method: "GET", target: "/v1/erasures/jobs/115", header: token, want: 200},
		{method: "GET", target: "/v1/erasures/jobs/2", header: token, want: 404},
		{method: "GET", target: "/v1/erasures/jobs/x", header: token, want: 400},
		{method: "GET", target: "/v1/erasures/jobs/999", header: token, want: 503},

		// Sinks.
		{method: "GET", target: "/v1/sinks", header: token, want: 200},
		// A parameter that is not text PostgreSQL can take is the caller's mistake, on every /v1 route.
		{method: "GET", target: "/v1/sinks?x=%FF", header: token, want: 400},
		{method: "GET", target: "/v1/sinks/ap%00p", header: token, want: 400},
		{method: "POST", target: "/v1/sinks/ap%FFp/pause", header: token, body: `{}`, want: 400},
		{method: "POST", target: "/v1/sinks/ap%FFp/resume", header: token, want: 400},
		{method: "GET", target: "/v1/messages/postscale/msg%00", header: token, want: 400},
		{method: "GET", target: "/v1/suppressions/a%FF@example.com", header: token, want: 400},
		{method: "GET", target: "/v1/suppressions/check?address=a%00@example.com", header: token, want: 400},
		{method: "GET", target: "/v1/sinks", header: map[string]string{"Authorization": "Bearer " + contractToken, "X-Fail": "sinks"}, want: 503},
		{method: "GET", target: "/v1/sinks/app", header: token, want: 200},
		{method: "GET", target: "/v1/sinks/new", header: token, want: 200}, // configured, no row yet
		{method: "GET", target: "/v1/sinks/nope", header: token, want: 404},
		{method: "GET", target: "/v1/sinks/down", header: token, want: 503},
		{method: "POST", target: "/v1/sinks/app/pause", header: token, want: 200},
		{method: "POST", target: "/v1/sinks/app/resume", header: token, want: 200},
		{method: "POST", target: "/v1/sinks/nope/pause", header: token, want: 404},
		{method: "POST", target: "/v1/sinks/nope/resume", header: token, want: 404},
		{method: "POST", target: "/v1/sinks/down/pause", header: token, want: 503},
		{method: "POST", target: "/v1/sinks/down/resume", header: token, want: 503},
		{method: "POST", target: "/v1/sinks/app/redeliver", header: token, want: 200},
		{method: "POST", target: "/v1/sinks/app/redeliver", header: token, body: `{"since":"2026-11-01T00:00:00Z","until":"2026-11-02T00:00:00Z","provider":"postscale","type":"message.status_changed","status":["failed","sent"],"dry_run":true}`, want: 200},
		{method: "POST", target: "/v1/sinks/app/redeliver", header: token, body: `{"status":["pending"]}`, want: 400},
		{method: "POST", target: "/v1/sinks/app/redeliver", header: token, body: `{"type":"email.teleported"}`, want: 400},
		{method: "POST", target: "/v1/sinks/app/redeliver", header: token, body: `{"since":"2026-11-02T00:00:00Z","until":"2026-11-01T00:00:00Z"}`, want: 400},
		{method: "POST", target: "/v1/sinks/app/redeliver", header: token, body: `{"sine":"2026-11-02T00:00:00Z"}`, want: 400},
		{method: "POST", target: "/v1/sinks/nope/redeliver", header: token, want: 404},
		{method: "POST", target: "/v1/sinks/down/redeliver", header: token, want: 503},
		{method: "GET", target: "/v1/sinks/app/notifications", header: token, want: 200},
		{method: "GET", target: "/v1/sinks/app/notifications?status=failed&limit=1&after=ntf_0", header: token, want: 200},
		{method: "GET", target: "/v1/sinks/app/notifications?status=lost", header: token, want: 400},
		{method: "GET", target: "/v1/sinks/app/notifications?limit=0", header: token, want: 400},
		{method: "GET", target: "/v1/sinks/nope/notifications", header: token, want: 404},
		{method: "GET", target: "/v1/sinks/down/notifications", header: token, want: 503},

		// The explorer, timelines and the audit trail.
		{method: "GET", target: "/v1/events", header: token, want: 200},
		{method: "GET", target: "/v1/events?provider=postscale&type=email.bounced&outcome=stale&recipient=Jane%40Example.com&message_id=msg_1&since=2026-11-01T00:00:00Z&until=2026-12-01T00:00:00Z&quarantined=false&through_temporal=true&limit=2&after=cursor", header: token, want: 200},
		{method: "GET", target: "/v1/events?endpoint=plain", header: token, want: 200},
		{method: "GET", target: "/v1/events?endpoint=nope", header: token, want: 400},
		{method: "GET", target: "/v1/events?outcome=lost", header: token, want: 400},
		{method: "GET", target: "/v1/events?since=yesterday", header: token, want: 400},
		{method: "GET", target: "/v1/events?quarantined=maybe", header: token, want: 400},
		{method: "GET", target: "/v1/events?after=bad", header: token, want: 400},
		{method: "GET", target: "/v1/events?provider=down", header: token, want: 503},
		{method: "GET", target: "/v1/messages/postscale/msg_1/timeline", header: token, want: 200},
		{method: "GET", target: "/v1/messages/postscale/missing/timeline", header: token, want: 404},
		{method: "GET", target: "/v1/messages/postscale/msg_1/timeline?limit=2&after=cursor", header: token, want: 200},
		{method: "GET", target: "/v1/messages/postscale/msg_1/timeline?after=bad", header: token, want: 400},
		{method: "GET", target: "/v1/messages/postscale/msg_1/timeline?after=a&before=b", header: token, want: 400},
		{method: "GET", target: "/v1/messages/postscale/msg_1/timeline?limit=0", header: token, want: 400},
		{method: "GET", target: "/v1/messages/postscale/msg%00/timeline", header: token, want: 400},
		{method: "GET", target: "/v1/messages/postscale/down/timeline", header: token, want: 503},
		{method: "GET", target: "/v1/audit", header: token, want: 200},
		{method: "GET", target: "/v1/audit?action=erasure&token=ops&since=2026-11-01T00:00:00Z&until=2026-12-01T00:00:00Z&limit=1&after=cursor", header: token, want: 200},
		{method: "GET", target: "/v1/audit?action=delete", header: token, want: 400},
		{method: "GET", target: "/v1/audit?after=bad", header: token, want: 400},
		{method: "GET", target: "/v1/audit?token=down", header: token, want: 503},

		// Paths and methods nothing serves: the same JSON body (the document's NotRouted), with
		// or without a token.
		{method: "GET", target: "/v1/widgets", header: token, want: 404},
		{method: "GET", target: "/v1/widgets", want: 404},
		{method: "PUT", target: "/v1/redrive", header: token, want: 404},
		{method: "GET", target: "/webhooks/plain", want: 404},
		{method: "POST", target: "/webhooks", want: 404},
		{method: "GET", target: "/nowhere", want: 404},
	}
	for _, c := range cases {
		var body io.Reader = strings.NewReader(c.body)
		if c.bodyReader != nil {
			body = c.bodyReader
		}
		req := httptest.NewRequest(c.method, c.target, body)
		if c.bodyReader != nil {
			req.ContentLength = -1
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		status, raw := f.do(req)
		if status != c.want {
			t.Errorf("%s %s: %d, want %d: %s", c.method, c.target, status, c.want, raw)
		}
	}

	// Every operation the token guards answers 401 without it (the handler never runs).
	doc, _, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security != nil && len(*op.Security) == 0 {
				continue
			}
			target := strings.NewReplacer("{provider}", "postscale", "{message_id}", "msg_1", "{address}", "user@example.com", "{event_id}", "evt_1",
				"{name}", "app", "{id}", "1").Replace(path)
			for _, header := range []string{"", "Bearer wrong-token", "Basic " + contractToken} {
				req := httptest.NewRequest(method, target, strings.NewReader(`{}`))
				if header != "" {
					req.Header.Set("Authorization", header)
				}
				if status, raw := f.do(req); status != http.StatusUnauthorized {
					t.Errorf("%s %s with Authorization %q: %d, want 401: %s", method, target, header, status, raw)
				}
			}
		}
	}

	// Every guarded operation names the one scope it needs, and the router agrees: a token
	// holding another scope gets 403 naming it, and one holding it (or admin) gets past.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security == nil || len(*op.Security) == 0 {
				continue
			}
			req := (*op.Security)[0]["bearerAuth"]
			if len(*op.Security) != 1 || len(req) != 1 || !slices.Contains(domain.Scopes, req[0]) {
				t.Errorf("%s %s: security %v, want one bearerAuth requirement naming one scope of domain.Scopes", method, path, *op.Security)
				continue
			}
			scope := req[0]
			target := strings.NewReplacer("{provider}", "postscale", "{message_id}", "msg_1", "{address}", "user@example.com", "{event_id}", "evt_1",
				"{name}", "app").Replace(path)
			other := domain.ScopeCodec
			if scope == other {
				other = domain.ScopeErasure
			}
			if domain.Grants([]string{other}, scope) {
				t.Fatalf("%s grants %s", other, scope)
			}
			for _, held := range []string{other, scope, domain.ScopeAdmin} {
				r := httptest.NewRequest(method, target, strings.NewReader(`{}`))
				r.Header.Set("Authorization", "Bearer "+scopedToken(held))
				r.Header.Set("Content-Type", "application/json")
				status, raw := f.do(r)
				switch {
				case held == other && (status != http.StatusForbidden || !strings.Contains(raw, strconv.Quote(scope)[1:len(strconv.Quote(scope))-1])):
					t.Errorf("%s %s with a token holding %s: %d %s, want 403 naming %s", method, target, held, status, raw, scope)
				case held != other && (status == http.StatusForbidden || status == http.StatusUnauthorized):
					t.Errorf("%s %s with a token holding %s: %d %s, want it let through", method, target, held, status, raw)
				}
			}
		}
	}

	// Every documented answer was seen, but those no test can bring about here.
	unreachable := map[string]string{
		"receiveWebhook 431": "answered by net/http before the handler runs",
		"correctMessage 500": "encoding a correction cannot fail",
	}
	var missing []string
	for path, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for code := range op.Responses.Map() {
				key := op.OperationID + " " + code
				if !f.seen[key] && unreachable[key] == "" {
					missing = append(missing, key)
				}
			}
		}
		_ = path
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("documented answers no case produced: %v", missing)
	}
}

// contractFixture is a Server over fake dependencies, wrapped in openapitest.Validate.
type contractFixture struct {
	t       testing.TB
	handler http.Handler
	seen    map[string]bool // "operationId status" answered
}

func newContractFixture(t *testing.T) *contractFixture {
	t.Helper()
	fake := &fakeBackend{}
	s := &httpapi.Server{
		Endpoints: map[string]httpapi.Endpoint{
			"plain": {Name: "plain", Provider: "plain", Adapter: fakeAdapter{}},
			"sns":   {Name: "sns", Provider: "sns", Adapter: fakeControlAdapter{}},
			"nonce": {Name: "nonce", Provider: "nonce", Adapter: fakeNonceAdapter{}},
			// Only from a range no test request comes from: refused before the body is read.
			"fenced": {Name: "fenced", Provider: "nonce", Adapter: fakeNonceAdapter{}, Allow: allowlist.List{netip.MustParsePrefix("198.51.100.0/24")}},
		},
		MaxBodyBytes:        1024,
		MaxEventsPerRequest: 3,
		Acceptor:            fake,
		Messages:            fake,
		Suppressions:        fake,
		Quarantine:          fake,
		RejectedList:        fake,
		Nonces:              fake,
		Reconciler:          fake,
		Erasures:            fake,
		Explorer:            fake,
		Audit:               fake,
		TemporalUI:          "http://127.0.0.1:8233",
		EraseWait:           200 * time.Millisecond,
		SinkStates:          fake,
		Sinks:               []httpapi.SinkSettings{{Name: "app", Kind: "http", Types: []string{domain.TypeStatusChanged}, Rate: 10, Concurrency: 4}, {Name: "new", Kind: "nats", Types: []string{domain.TypeEmailReceived}}, {Name: "down", Kind: "http"}},
		Ready: map[string]func(context.Context) error{
			"postgres": func(context.Context) error { return fake.readiness("postgres") },
			"temporal": func(context.Context) error { return fake.readiness("temporal") },
		},
		NotRequired: map[string]bool{"temporal": true},
		RetryAfter:  5 * time.Second,
		AdminTokens: map[string]string{contractToken: "contract"},
		TokenScopes: map[string][]string{},
		Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	// One token per scope, holding that scope alone (scopedToken).
	for _, sc := range domain.Scopes {
		s.AdminTokens[scopedToken(sc)] = "holds " + sc
		s.TokenScopes[scopedToken(sc)] = []string{sc}
	}
	inner := s.Handler()
	// X-Fail names the readiness check to fail for this request.
	withFail := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fake.fail.Store(r.Header.Get("X-Fail"))
		inner.ServeHTTP(w, r)
	})
	return &contractFixture{t: t, handler: openapitest.Validate(t, withFail), seen: map[string]bool{}}
}

// do sends req through the validating handler and records which documented answer it got.
func (f *contractFixture) do(req *http.Request) (int, string) {
	_, router, err := openapitest.Load()
	if err != nil {
		panic(err)
	}
	route, _, findErr := router.FindRoute(req)
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	if findErr == nil {
		f.seen[fmt.Sprintf("%s %d", route.Operation.OperationID, rec.Code)] = true
	}
	if rec.Code >= 400 && req.URL.Path != "/readyz" { // /readyz answers its Readiness report
		// One body for every error: the document requires reason; it must say something.
		var body struct{ Error, Reason string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == "" || body.Reason == "" {
			f.t.Errorf("%s %s: %d without an error and a reason: %s", req.Method, req.URL, rec.Code, rec.Body)
		}
	}
	return rec.Code, rec.Body.String()
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// fakeAdapter: "unsigned" fails verification, "verify-later" cannot be verified now, and
// "events:<id>,<id>" carries those events; anything else is malformed.
type fakeAdapter struct{}

func (fakeAdapter) Verify(r provider.Request) error {
	switch string(r.Body) {
	case "unsigned":
		return fmt.Errorf("fake: %w: no signature", provider.ErrUnauthorized)
	case "verify-later":
		return errors.New("fake: certificate unreachable")
	}
	return nil
}

func (fakeAdapter) Parse(r provider.Request) ([]domain.Event, error) {
	ids, ok := strings.CutPrefix(string(r.Body), "events:")
	if !ok {
		return nil, fmt.Errorf("fake: %w: not an event", provider.ErrBadRequest)
	}
	var evs []domain.Event
	for _, id := range strings.Split(ids, ",") {
		if id == "" {
			continue
		}
		evs = append(evs, domain.Event{Provider: "fake", EventID: id, Type: "delivered", Kind: domain.KindStatus,
			Status: domain.StatusDelivered, MessageID: "msg_1", OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)})
	}
	return evs, nil
}

// fakeControlAdapter answers "control:ok", "control:bad" and "control:down" as SES does its
// SNS control messages.
type fakeControlAdapter struct{ fakeAdapter }

func (fakeControlAdapter) Control(r provider.Request) (bool, string, error) {
	switch string(r.Body) {
	case "control:ok":
		return true, "subscribed", nil
	case "control:bad":
		return false, "", fmt.Errorf("fake: %w: unknown message type", provider.ErrBadRequest)
	case "control:down":
		return false, "", errors.New("fake: SubscribeURL unreachable")
	}
	return false, "", nil
}

// fakeNonceAdapter refuses with 406 and binds the X-Nonce header, as Mailgun does its token.
type fakeNonceAdapter struct{ fakeAdapter }

func (fakeNonceAdapter) RejectStatus() int { return http.StatusNotAcceptable }

func (fakeNonceAdapter) Nonce(r provider.Request) (provider.Nonce, bool) {
	n := r.Header.Get("X-Nonce")
	return provider.Nonce{Value: n, Expires: time.Now().Add(time.Hour)}, n != ""
}

// fakeBackend stands in for PostgreSQL and Temporal. Names say what happens: "missing" is not
// found, "down" is unavailable.
type fakeBackend struct {
	fail     atomic.Value // string: the readiness check to fail
	erasures sync.Map     // address → its store.ErasureRequest
	// erasureAddr: job id → the address whose job was started last under it (ids are first letters)
	erasureAddr sync.Map
}

var errDown = errors.New("fake: unavailable")

func (b *fakeBackend) readiness(name string) error {
	if v, _ := b.fail.Load().(string); v == name {
		return errDown
	}
	return nil
}

func (b *fakeBackend) Accept(_ context.Context, evs []domain.Event) ([]acceptance.Verdict, error) {
	out := make([]acceptance.Verdict, len(evs))
	for i, ev := range evs {
		switch {
		case strings.HasPrefix(ev.EventID, "down"), ev.MessageID == "accept-down":
			return nil, errDown
		case strings.HasPrefix(ev.EventID, "dup"):
			out[i] = acceptance.Verdict{Status: acceptance.Duplicate}
		case strings.HasPrefix(ev.EventID, "bad"), ev.MessageID == "reject-me":
			out[i] = acceptance.Verdict{Status: acceptance.Rejected, Err: errors.New("message_id longer than 255 bytes")}
		default:
			out[i] = acceptance.Verdict{Status: acceptance.Accepted}
		}
	}
	return out, nil
}

// The sinks: "app" is recorded (open, with parked notifications), "gone" is recorded but no
// longer configured, "new" is configured without a row, and "down"'s database is unavailable.
func (b *fakeBackend) ListSinks(context.Context) ([]delivery.Sink, error) {
	if err := b.readiness("sinks"); err != nil { // X-Fail: sinks
		return nil, err
	}
	app, _ := b.SinkByName(context.Background(), "app")
	return []delivery.Sink{app, {Name: "gone", State: delivery.Closed, Parked: 3, UpdatedAt: time.Unix(1700000000, 0).UTC()}}, nil
}

func (b *fakeBackend) SinkByName(_ context.Context, name string) (delivery.Sink, error) {
	switch name {
	case "down":
		return delivery.Sink{}, errDown
	case "app":
		at := time.Unix(1700000000, 0).UTC()
		next := at.Add(time.Minute)
		return delivery.Sink{Name: "app", State: delivery.Open, ConsecutiveFailures: 7, OpenedAt: &at, ProbeFailures: 2, NextProbeAt: &next,
			LastError: "notify: sink responded 503 Service Unavailable", LastErrorAt: &at, Parked: 42, OldestParkedAt: &at, Failed: 1, UpdatedAt: at}, nil
	}
	return delivery.Sink{}, domain.ErrNotFound
}

func (b *fakeBackend) PauseSink(ctx context.Context, name string, paused bool, by string) (delivery.Sink, error) {
	sk, err := b.SinkByName(ctx, name)
	if errors.Is(err, domain.ErrNotFound) {
		sk, err = delivery.Sink{Name: name, State: delivery.Closed}, nil
	}
	if paused {
		at := time.Unix(1700000000, 0).UTC()
		sk.Paused, sk.PausedAt, sk.PausedBy = true, &at, by
	}
	return sk, err
}

func (b *fakeBackend) Redeliver(_ context.Context, f store.RedeliverFilter) (store.Redelivery, error) {
	if f.DryRun {
		return store.Redelivery{Matched: 5, AlreadyParked: 1, Unavailable: 1}, nil
	}
	return store.Redelivery{Matched: 5, Requeued: 3, AlreadyParked: 1, Unavailable: 1, Woke: true}, nil
}

func (b *fakeBackend) ListSinkNotifications(_ context.Context, f store.SinkNotificationFilter) ([]delivery.Notification, string, error) {
	at := time.Unix(1700000000, 0).UTC()
	n := delivery.Notification{ID: "ntf_1", Provider: "postscale", EventID: "evt_1", Sink: f.Sink, Type: domain.TypeStatusChanged, Status: f.Status,
		Attempts: 4, LastError: "notify: sink responded 503 Service Unavailable", CreatedAt: at, MessageID: "msg_1", Version: 2,
		ParkedAt: &at, ParkReason: delivery.ReasonRetriesSpent}
	return []delivery.Notification{n}, "ntf_1", nil
}

func (b *fakeBackend) BindNonce(_ context.Context, _, nonce, eventID string, _ time.Time) (string, error) {
	switch nonce {
	case "down":
		return "", errDown
	case "used":
		return "another-event", nil
	}
	return eventID, nil
}

var (
	t0 = time.Date(2026, 1, 2, 3, 4, 5, 600000000, time.UTC)
	t1 = t0.Add(time.Minute)
)

func (b *fakeBackend) GetMessage(_ context.Context, prov, id string) (store.Message, error) {
	switch id {
	case "missing":
		return store.Message{}, fmt.Errorf("get message: %w", domain.ErrNotFound)
	case "down":
		return store.Message{}, errDown
	case "fresh": // only an open seen so far: no status yet
		return store.Message{Provider: prov, MessageID: id, Opens: 1, FirstOpenedAt: &t0, CreatedAt: t0, UpdatedAt: t0,
			Events: []store.MessageEvent{{EventID: "o1", Type: "opened", OccurredAt: t0, ReceivedAt: t0, Outcome: domain.OutcomeCounted}}}, nil
	}
	return store.Message{
		Provider: prov, MessageID: id, Status: domain.StatusDelivered, BounceType: "soft", Recipient: "user@example.com",
		Version: 3, Unsubscribed: true, UnsubscribedAt: &t1, Opens: 2, Clicks: 1, FirstOpenedAt: &t0, FirstClickedAt: &t1,
		CorrectedAt: &t1, CreatedAt: t0, UpdatedAt: t1,
		Events: []store.MessageEvent{
			{EventID: "e1", Type: "bounced", Status: domain.StatusBounced, OccurredAt: t0, ReceivedAt: t0,
				Outcome: domain.OutcomeMoved, Moved: true, From: domain.StatusAccepted, To: domain.StatusBounced, Version: 2, Suppressed: true},
			{EventID: "correction-1", Type: domain.CorrectionType, Status: domain.StatusDelivered, OccurredAt: t1, ReceivedAt: t1,
				Outcome: domain.OutcomeMoved, Moved: true, From: domain.StatusBounced, To: domain.StatusDelivered, Version: 3,
				Actor: "ops", Note: "wrong DSN"},
		},
	}, nil
}

func sampleSuppression(addr string) store.Suppression {
	return store.Suppression{Address: addr, Scope: suppression.GlobalScope, Reason: domain.ReasonHardBounce, Provider: "postscale",
		EventID: "e1", MessageID: "msg_1", FirstSeen: t0, LastSeen: t1, TimesSeen: 2}
}

func (b *fakeBackend) ListSuppressions(_ context.Context, f store.SuppressionFilter) ([]store.Suppression, error) {
	switch f.After {
	case "down":
		return nil, errDown
	case "zzz":
		return nil, nil
	}
	var out []store.Suppression
	for i := range min(f.Limit, 3) {
		sup := sampleSuppression(fmt.Sprintf("user%d@example.com", i))
		if f.Scope != "" {
			sup.Scope = f.Scope
		}
		out = append(out, sup)
		if i == 0 && f.Scope == "" {
			// The first address is also suppressed in a scope: two rows, one address.
			sup.Scope, sup.Reason = "marketing", domain.ReasonUnsubscribe
			out = append(out, sup)
		}
	}
	return out, nil
}

func (b *fakeBackend) AddressSuppressions(_ context.Context, addr string) ([]store.Suppression, error) {
	switch addr {
	case "missing@example.com":
		return nil, domain.ErrNotFound
	case "down@example.com":
		return nil, errDown
	}
	scoped := sampleSuppression(addr)
	scoped.Scope, scoped.Reason = "marketing", domain.ReasonUnsubscribe
	return []store.Suppression{sampleSuppression(addr), scoped}, nil
}

func (b *fakeBackend) CheckSuppression(_ context.Context, addr, scope string) (store.SuppressionCheck, error) {
	res := store.SuppressionCheck{Address: addr, Scope: scope, Reasons: []string{}}
	switch addr {
	case "down@example.com":
		return store.SuppressionCheck{}, errDown
	case "user@example.com", "a+b@example.com":
		res.Suppressed, res.Reasons = true, []string{domain.ReasonHardBounce}
	}
	return res, nil
}

func (b *fakeBackend) LiftSuppression(_ context.Context, addr, scope, by, why string) (store.SuppressionLift, error) {
	sups, err := b.AddressSuppressions(context.Background(), addr)
	if err != nil {
		return store.SuppressionLift{}, err
	}
	sup := sups[0]
	return store.SuppressionLift{ID: 7, Address: sup.Address, Scope: scope, Reason: sup.Reason, Provider: sup.Provider, EventID: sup.EventID,
		MessageID: sup.MessageID, FirstSeen: sup.FirstSeen, LastSeen: sup.LastSeen, TimesSeen: sup.TimesSeen,
		LiftedBy: by, LiftReason: why, LiftedAt: t1}, nil
}

func (b *fakeBackend) ListRejected(_ context.Context, f store.RejectedFilter) ([]store.RejectedRequest, string, error) {
	switch {
	case f.After == "bad":
		return nil, "", fmt.Errorf("list rejected: %w", store.ErrBadCursor)
	case f.Endpoint == "down":
		return nil, "", errDown
	case f.Endpoint == "empty":
		return nil, "", nil
	}
	one, _ := b.GetRejected(context.Background(), 1)
	two, _ := b.GetRejected(context.Background(), 2)
	return []store.RejectedRequest{two, one}, "1", nil
}

func (b *fakeBackend) GetRejected(_ context.Context, id int64) (store.RejectedRequest, error) {
	switch id {
	case 1:
		return store.RejectedRequest{ID: 1, Endpoint: "postscale", Provider: "postscale", ReceivedAt: t0, Cause: "bad_signature", Status: 401,
			Reason: "no matching signature", RemoteAddr: "192.0.2.1", Size: 2, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte("{}")}, nil
	case 2:
		return store.RejectedRequest{ID: 2, Endpoint: "unknown", ReceivedAt: t1, Cause: "address_not_allowed", Status: 401,
			Reason: "source address not allowed", RemoteAddr: "192.0.2.1", Size: -1, Header: map[string][]string{}}, nil
	case 3, 4:
		body := map[int64]string{3: "events:e7", 4: "unsigned"}[id]
		return store.RejectedRequest{ID: id, Endpoint: "plain", Provider: "plain", ReceivedAt: t0, Cause: "bad_signature", Status: 401,
			Reason: "no signature", RemoteAddr: "192.0.2.1", Size: int64(len(body)), Header: map[string][]string{}, Body: []byte(body)}, nil
	case 503:
		return store.RejectedRequest{}, errDown
	}
	return store.RejectedRequest{}, fmt.Errorf("get rejected %d: %w", id, domain.ErrNotFound)
}

func (b *fakeBackend) RejectedRetried(context.Context, int64, string) error { return nil }

func (b *fakeBackend) RejectedDrops(context.Context, string) ([]store.RejectedDrop, error) {
	return []store.RejectedDrop{{Endpoint: "postscale", Hour: t0.Truncate(time.Hour), Dropped: 3}}, nil
}

func (b *fakeBackend) ListQuarantine(_ context.Context, f store.QuarantineFilter) ([]store.QuarantinedEvent, string, error) {
	switch {
	case f.After == "bad":
		return nil, "", fmt.Errorf("list quarantine: %w", store.ErrBadCursor)
	case f.Provider == "down":
		return nil, "", errDown
	case f.Provider == "empty":
		return []store.QuarantinedEvent{}, "", nil
	}
	return []store.QuarantinedEvent{
		{Provider: "postscale", EventID: "e1", EventType: "delivered", MessageID: "msg_1", ReceivedAt: t0, QuarantinedAt: t1, Stage: "ApplyStatus", Error: "value too long"},
		{Provider: "postscale", EventID: "e2", EventType: "opened", ReceivedAt: t0, QuarantinedAt: t1, Stage: "start", Error: "workflow id too long"},
	}, "cursor", nil
}

func (b *fakeBackend) ListEvents(_ context.Context, f store.EventFilter) ([]store.ExplorerEvent, string, error) {
	switch {
	case f.After == "bad":
		return nil, "", fmt.Errorf("list events: %w", store.ErrBadCursor)
	case len(f.Providers) > 0 && f.Providers[0] == "down":
		return nil, "", errDown
	}
	v := int64(2)
	return []store.ExplorerEvent{
		{Provider: "postscale", EventID: "e2", Type: "email.bounced", MessageID: "msg_1", OccurredAt: &t0, ReceivedAt: t1, ProcessedAt: &t1,
			State: store.EventProcessed, Outcome: "moved", AppliedAt: &t1, Version: &v, WorkflowID: "postscale:e2"},
		{Provider: "postscale", EventID: "e1", Type: "email.sent", ReceivedAt: t0, State: store.EventQuarantined, QuarantineStage: "Process",
			Source: store.SourceTemporal, WorkflowID: "postscale:e1"},
	}, "cursor", nil
}

func (b *fakeBackend) Timeline(_ context.Context, prov, messageID string, page store.TimelinePage, errorClass func(string) string) (store.Timeline, error) {
	if page.After == "bad" {
		return store.Timeline{}, fmt.Errorf("timeline: %w", store.ErrBadCursor)
	}
	switch messageID {
	case "missing":
		return store.Timeline{}, fmt.Errorf("timeline: %w", domain.ErrNotFound)
	case "down":
		return store.Timeline{}, errDown
	}
	v1, v2 := int64(1), int64(2)
	return store.Timeline{Provider: prov, MessageID: messageID, Status: domain.StatusBounced, Version: 2, Recipient: "user@example.com",
		Events: []store.TimelineEvent{
			{EventID: "e1", Type: "email.delivered", OccurredAt: &t1, ReceivedAt: t0, OccurrenceIndex: 1, State: store.EventProcessed,
				Precedence: store.PrecedenceApplied, Outcome: "moved", Status: domain.StatusDelivered, To: domain.StatusDelivered, Version: &v1,
				AppliedAt: &t1, ProcessedAt: &t1, WorkflowID: prov + ":e1"},
			{EventID: "e2", Type: "email.bounced", OccurredAt: &t0, ReceivedAt: t1, OccurrenceIndex: 0, State: store.EventProcessed,
				Precedence: store.PrecedenceStale, Outcome: "stale", Version: &v2, WorkflowID: prov + ":e2"},
		},
		OccurrenceOrder: []string{"e2", "e1"},
		Sinks: []store.TimelineSink{{Sink: "app", Notifications: []store.TimelineNotification{
			{ID: "ntf_1", EventID: "e1", Type: domain.TypeStatusChanged, Status: "parked", Attempts: 3, Version: &v1,
				LastError: "sink responded 503 Service Unavailable", ErrorClass: errorClass("sink responded 503 Service Unavailable"),
				ParkReason: "retries_spent", CreatedAt: t0, ParkedAt: &t1, UpdatedAt: t1}}}},
		Workflows: []store.TimelineWorkflow{{WorkflowID: prov + ":e1:replay:1", Kind: "replay", EventID: "e1"}, {WorkflowID: "sink:app", Kind: "sink"}},
		NextAfter: "cursor",
	}, nil
}

func (b *fakeBackend) ListAudit(_ context.Context, f store.AuditFilter) ([]store.AuditEntry, string, error) {
	switch {
	case f.After == "bad":
		return nil, "", fmt.Errorf("list audit: %w", store.ErrBadCursor)
	case f.Actor == "down":
		return nil, "", errDown
	}
	return []store.AuditEntry{{ID: 2, At: t1, Action: store.AuditSuppressionLift, Actor: "ops", Via: store.AuditViaAPI, Target: "scope:global",
		Params: map[string]any{"scope": "global", "address_hash": "erased:hmac-sha256:00"}, Status: 200, Result: store.AuditOK,
		Detail: map[string]any{}, Ref: "suppression_lifts:1"}}, "", nil
}

func (b *fakeBackend) RecordAudit(context.Context, store.AuditEntry) (int64, error) { return 1, nil }

func (b *fakeBackend) AddressHash(string) string { return "erased:hmac-sha256:00" }

func (b *fakeBackend) DailyReport(_ context.Context, date, prov string) (reconcile.Report, error) {
	switch {
	case date == "yesterday":
		return reconcile.Report{}, fmt.Errorf("%w: %q", reconcile.ErrBadDate, date)
	case prov == "down":
		return reconcile.Report{}, errDown
	}
	counts := []domain.DailyCount{{Date: "2026-01-02", Provider: "postscale", EventType: "delivered", Received: 3, Processed: 1, Unprocessed: 2, AwaitingStart: 1, Quarantined: 1}}
	checks := []providercounts.Check{
		{Endpoint: "sg", Provider: "sendgrid", State: providercounts.StateOK, Lines: providercounts.Compare(
			[]providercounts.Line{{Metric: "delivered", Count: 4, Types: []string{"delivered"}, Prefixes: []string{"Bounce"}, Note: "per recipient"}},
			map[string]int64{"delivered": 3}, nil, providercounts.Tolerance{})},
		{Endpoint: "pm", Provider: "postmark", State: providercounts.StateUnavailable, Error: "postmark: HTTP 503"},
	}
	return reconcile.Report{Date: "2026-01-02", Provider: prov, Counts: counts, Totals: domain.SumCounts(counts),
		ProviderCounts: reconcile.ProviderRows(checks), ProviderGaps: 1}, nil
}

func (b *fakeBackend) Replay(_ context.Context, prov, eventID string, renotify bool, _ string) (reconcile.ReplayResult, error) {
	switch eventID {
	case "missing":
		return reconcile.ReplayResult{}, fmt.Errorf("%w: %w", reconcile.ErrCannotReplay, domain.ErrNotFound)
	case "old":
		return reconcile.ReplayResult{}, fmt.Errorf("%w: %w", reconcile.ErrCannotReplay, store.ErrNotNormalized)
	case "down":
		return reconcile.ReplayResult{}, errDown
	}
	res := reconcile.ReplayResult{Provider: prov, EventID: eventID, Replay: 1, WorkflowID: reconcile.ReplayWorkflowID(prov, eventID, 1),
		RunID: "run-1", Renotify: renotify}
	if eventID == "waited" {
		res.Result = &domain.Result{
			Transition:    domain.Transition{Outcome: "moved", From: domain.StatusAccepted, To: domain.StatusDelivered, Version: 2},
			Notifications: []domain.NotificationResult{{Sink: "app", Type: "status_changed", ID: "n1", Status: "sent", AlreadySent: true}}}
	}
	return res, nil
}

func (b *fakeBackend) Redrive(_ context.Context, in domain.RedriveInput) (domain.RedriveResult, error) {
	if in.Limit == 13 {
		return domain.RedriveResult{}, errDown
	}
	res := domain.RedriveResult{OlderThan: in.OlderThan.String()}
	if in.Quarantined {
		return res, nil // nothing quarantined: no events at all
	}
	for i, o := range []string{domain.RedriveStarted, domain.RedriveRunning, domain.RedriveSkipped, domain.RedriveFailed} {
		out := domain.RedriveOutcome{Provider: "postscale", EventID: fmt.Sprint("e", i), EventType: "delivered", ReceivedAt: t0, Outcome: o}
		if o == domain.RedriveFailed {
			out.Error = "temporal unavailable"
		}
		res.Add(out)
	}
	res.More = true
	return res, nil
}

// StartErasure, WaitErasure and ErasureJob fake an erasure by its address: erasure jobs are
// numbered by the address's first letter, so the job of an answer can be looked up again.
func (b *fakeBackend) StartErasure(_ context.Context, req store.ErasureRequest) (domain.ErasureJob, error) {
	addr := mailaddr.Key(req.Address)
	switch {
	case !strings.Contains(addr, "@"):
		return domain.ErasureJob{}, fmt.Errorf("erase: %w", store.ErrInvalidAddress)
	case addr == "unconfigured@example.com":
		return domain.ErasureJob{}, fmt.Errorf("erase: %w", store.ErrErasureNotConfigured)
	case req.Scope != "" && req.Scope != store.ErasureScopeAll && req.Scope != store.ErasureScopeInbound:
		return domain.ErasureJob{}, fmt.Errorf("erase: %w", store.ErrInvalidErasureScope)
	}
	b.erasures.Store(addr, req)
	job := fakeJob(addr, req)
	b.erasureAddr.Store(job.ID, addr)
	return job, nil
}

func fakeJob(addr string, req store.ErasureRequest) domain.ErasureJob {
	counts := map[string]int64{}
	for _, table := range store.ErasureTables {
		counts[table] = 0
	}
	return domain.ErasureJob{ID: int64(addr[0]), Status: domain.ErasureRunning, AddressHash: "erased:hmac-sha256:" + strings.Repeat("0a", 32),
		ErasedBy: req.ErasedBy, Reason: req.Reason, Scope: cmp.Or(req.Scope, store.ErasureScopeAll), Force: req.Force, DryRun: req.DryRun,
		Phase: "event_payloads", Phases: 9, Counts: counts, CreatedAt: t0, UpdatedAt: t1}
}

func (b *fakeBackend) WaitErasure(ctx context.Context, id int64) (store.Erasure, error) {
	a, _ := b.erasureAddr.Load(id)
	addr := a.(string)
	v, _ := b.erasures.Load(addr)
	req := v.(store.ErasureRequest)
	switch addr {
	case "down@example.com":
		return store.Erasure{}, errDown
	case "slow@example.com": // outlasts the fixture's EraseWait
		<-ctx.Done()
		return store.Erasure{}, ctx.Err()
	}
	job := fakeJob(addr, req)
	e := store.Erasure{ID: 1, JobID: job.ID, AddressHash: job.AddressHash, ErasedBy: req.ErasedBy, Reason: req.Reason,
		Counts: job.Counts, ErasedAt: t1, Scope: job.Scope, DryRun: req.DryRun}
	if addr != "gone@example.com" { // erased before: nothing left
		e.Counts["event_payloads"], e.Counts["suppressions"], e.Total, e.TookMS = 3, 1, 4, 12
	}
	if addr == "support@example.com" { // a mailbox customers wrote to
		e.InboundTo = 3
	}
	switch {
	case req.DryRun:
		e.ID = 0
	case e.InboundTo > 0 && !req.Force && e.Scope != store.ErasureScopeInbound:
		return store.Erasure{}, fmt.Errorf("erase: %w", &store.SharedAddressError{Would: e})
	}
	return e, nil
}

func (b *fakeBackend) ErasureJob(_ context.Context, id int64) (domain.ErasureJob, error) {
	if id == 999 {
		return domain.ErasureJob{}, errDown
	}
	var job domain.ErasureJob
	b.erasures.Range(func(k, v any) bool {
		if addr := k.(string); int64(addr[0]) == id {
			job = fakeJob(addr, v.(store.ErasureRequest))
			return false
		}
		return true
	})
	if job.ID == 0 {
		return domain.ErasureJob{}, fmt.Errorf("erasure job %d: %w", id, domain.ErrNotFound)
	}
	return job, nil
}

// A /v1 400 says what is wrong in reason, as webhook answers do; error is the kind.
func TestAdminBadRequestsCarryAReason(t *testing.T) {
	f := newContractFixture(t)
	for target, want := range map[string]string{
		"/v1/suppressions?limit=0":         "limit must be a positive integer",
		"/v1/suppressions?reason=bored":    `unknown reason "bored"`,
		"/v1/suppressions/check":           "address is required",
		"/v1/reports/daily?date=yesterday": "yesterday",
		"/v1/quarantine?after=bad":         "after is not a next_after",
	} {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req.Header.Set("Authorization", "Bearer "+contractToken)
		status, raw := f.do(req)
		var body map[string]any
		_ = json.Unmarshal([]byte(raw), &body)
		if status != http.StatusBadRequest || body["error"] != "bad request" || !strings.Contains(fmt.Sprint(body["reason"]), want) {
			t.Errorf("GET %s: %d %s, want 400 bad request with a reason saying %q", target, status, raw, want)
		}
	}
}

// A path nothing serves answers the one JSON error body (validated against the document's
// NotRouted response by the fixture), not gin's plain-text "404 page not found".
func TestUnroutedPathAnswersJSON(t *testing.T) {
	f := newContractFixture(t)
	req := httptest.NewRequest(http.MethodGet, "/v1/no-such-thing", nil)
	status, raw := f.do(req)
	if status != http.StatusNotFound || raw != `{"error":"not found","reason":"no such route"}` {
		t.Errorf("GET /v1/no-such-thing: %d %s", status, raw)
	}
}

// A served path with a trailing slash is a path nothing serves: the JSON 404, not gin's 301 or
// 307 to the path without it, which a client would follow with its token (issue 41).
func TestTrailingSlashAnswersJSON404(t *testing.T) {
	f := newContractFixture(t)
	for _, r := range []struct{ method, target string }{
		{http.MethodPost, "/v1/sinks/app/pause/"},
		{http.MethodGet, "/v1/suppressions/"},
		{http.MethodGet, "/v1/suppressions/check/?address=a@example.com"},
		{http.MethodPost, "/webhooks/postscale/"},
	} {
		req := httptest.NewRequest(r.method, r.target, nil)
		req.Header.Set("Authorization", "Bearer "+contractToken)
		status, raw := f.do(req)
		if status != http.StatusNotFound || raw != `{"error":"not found","reason":"no such route"}` {
			t.Errorf("%s %s: %d %s, want the JSON 404", r.method, r.target, status, raw)
		}
	}
}
