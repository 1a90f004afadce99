package e2e_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/testenv"
)

// acceptStreamEvent records an event carrying a provider stream, as an adapter that reports one
// would produce it, through the same acceptance path as a webhook (Postscale's envelope has no
// stream).
func (h *harness) acceptStreamEvent(ev domain.Event) {
	h.t.Helper()
	ev.Provider, ev.Type, ev.Raw = "postscale", "email."+string(ev.Kind), json.RawMessage(`{}`)
	if ev.Kind == domain.KindStatus {
		ev.Type = "email." + string(ev.Status)
	}
	verdicts, err := h.svc.Acceptor().Accept(context.Background(), []domain.Event{ev})
	if err != nil || verdicts[0].Status != acceptance.Accepted {
		h.t.Fatalf("accept %s: %v %+v", ev.EventID, err, verdicts)
	}
}

// Scoped suppressions end to end: events from mapped streams suppress in their scope only, a
// hard bounce globally; the check endpoint, the ?scope= filters and the per-scope lift answer
// over real HTTP from PostgreSQL, every answer held to the OpenAPI document.
func TestSuppressionScopesAndCheck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{
		sinkTypes:         []string{domain.TypeSuppressionAdded},
		suppressionScopes: map[string]string{"broadcast": "marketing", "outbound": "transactional"},
	})
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	const jane, bob = "jane+news@example.com", "bob@example.com"
	unsub, complaint, bounce := h.id("evt_scope_unsub"), h.id("evt_scope_complaint"), h.id("evt_scope_bounce")
	h.acceptStreamEvent(domain.Event{EventID: unsub, Kind: domain.KindUnsubscribed, MessageID: h.id("msg_scope_1"),
		Recipient: "Jane+News@Example.com", Stream: "broadcast", OccurredAt: at})
	h.acceptStreamEvent(domain.Event{EventID: complaint, Kind: domain.KindStatus, Status: domain.StatusComplained,
		MessageID: h.id("msg_scope_2"), Recipient: jane, Stream: "outbound", OccurredAt: at})
	if code, resp := h.post(withRecipient(h.envelope(bounce, "email.bounced", h.id("msg_scope_3"), at, `,"bounce_type":"hard"`), bob)); code != 200 {
		t.Fatalf("post bounce: %d %v", code, resp)
	}
	h.waitProcessed(unsub, complaint, bounce)

	// suppression.added names each scope.
	testenv.WaitCount(t, domain.TypeSuppressionAdded+" notifications", testenv.Stall, 3, func() int { return len(h.deliveredOfType(domain.TypeSuppressionAdded)) })
	scopes := map[string]string{}
	for _, d := range h.deliveredOfType(domain.TypeSuppressionAdded) {
		data := d.Body["data"].(map[string]any)
		scopes[data["event_id"].(string)] = data["address"].(string) + " " + data["scope"].(string)
	}
	if want := map[string]string{unsub: jane + " marketing", complaint: jane + " transactional", bounce: bob + " global"}; !maps.Equal(scopes, want) {
		t.Fatalf("suppression.added scopes %v, want %v", scopes, want)
	}

	check := func(address, scope string) (bool, []any) {
		t.Helper()
		target := "/v1/suppressions/check?address=" + address
		if scope != "" {
			target += "&scope=" + scope
		}
		code, resp := h.admin(http.MethodGet, target, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %v", target, code, resp)
		}
		reasons, _ := resp["reasons"].([]any)
		return resp["suppressed"] == true, reasons
	}
	for _, tc := range []struct {
		address, scope string
		want           bool
		reasons        []any
	}{
		// "+" unencoded is a plus, as %2B is; the address is compared lower-cased.
		{"Jane+News@example.com", "marketing", true, []any{domain.ReasonUnsubscribe}},
		{url.QueryEscape(jane), "marketing", true, []any{domain.ReasonUnsubscribe}},
		{jane, "transactional", true, []any{domain.ReasonComplaint}},
		{jane, "", false, []any{}},
		{jane, "global", false, []any{}},
		{jane, "newsletter", false, []any{}},
		{bob, "marketing", true, []any{domain.ReasonHardBounce}},
		{bob, "", true, []any{domain.ReasonHardBounce}},
		{"nobody@example.com", "marketing", false, []any{}},
	} {
		got, reasons := check(tc.address, tc.scope)
		if got != tc.want || !slices.Equal(reasons, tc.reasons) {
			t.Errorf("check %s in %q: suppressed %v %v, want %v %v", tc.address, tc.scope, got, reasons, tc.want, tc.reasons)
		}
	}
	for _, bad := range []string{"/v1/suppressions/check", "/v1/suppressions/check?address=%20", "/v1/suppressions/check?address=a@example.com&scope=Marketing"} {
		if code, resp := h.admin(http.MethodGet, bad, ""); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d %v, want 400", bad, code, resp)
		}
	}

	list := func(query string) []string {
		t.Helper()
		code, resp := h.admin(http.MethodGet, "/v1/suppressions"+query, "")
		if code != 200 {
			t.Fatalf("GET /v1/suppressions%s: %d %v", query, code, resp)
		}
		var rows []string
		for _, r := range resp["suppressions"].([]any) {
			m := r.(map[string]any)
			rows = append(rows, m["address"].(string)+" "+m["scope"].(string))
		}
		return rows
	}
	for query, want := range map[string][]string{
		"":                                      {bob + " global", jane + " marketing", jane + " transactional"},
		"?scope=global":                         {bob + " global"},
		"?scope=marketing":                      {jane + " marketing"},
		"?scope=transactional&reason=complaint": {jane + " transactional"},
		"?scope=marketing&reason=complaint":     nil,
		"?limit=1&after=" + bob:                 {jane + " marketing", jane + " transactional"},
	} {
		if got := list(query); !slices.Equal(got, want) {
			t.Errorf("list%s: %v, want %v", query, got, want)
		}
	}
	if code, _ := h.admin(http.MethodGet, "/v1/suppressions?scope=no%20such", ""); code != http.StatusBadRequest {
		t.Errorf("list with a malformed scope: %d, want 400", code)
	}

	// One address, every scope's row; the top level is the first (no global row here).
	code, resp := h.admin(http.MethodGet, "/v1/suppressions/"+url.PathEscape(jane), "")
	rows, _ := resp["suppressions"].([]any)
	if code != 200 || resp["scope"] != "marketing" || resp["reason"] != domain.ReasonUnsubscribe || len(rows) != 2 ||
		rows[1].(map[string]any)["scope"] != "transactional" {
		t.Fatalf("get %s: %d %v", jane, code, resp)
	}

	// A lift takes one scope: global by default, which jane does not have.
	if code, resp := h.admin(http.MethodDelete, "/v1/suppressions/"+jane, `{"reason":"asked"}`); code != http.StatusNotFound {
		t.Fatalf("lift jane's global: %d %v, want 404", code, resp)
	}
	code, resp = h.admin(http.MethodDelete, "/v1/suppressions/"+jane+"?scope=marketing", `{"reason":"re-subscribed"}`)
	if code != 200 || resp["scope"] != "marketing" || resp["reason"] != domain.ReasonUnsubscribe || resp["lifted_by"] != "e2e-operator" {
		t.Fatalf("lift jane's marketing: %d %v", code, resp)
	}
	if got, _ := check(jane, "marketing"); got {
		t.Error("jane is still suppressed for marketing after the lift")
	}
	if got, _ := check(jane, "transactional"); !got {
		t.Error("lifting marketing lifted transactional too")
	}
	if n := h.query(`SELECT count(*) FROM suppression_lifts WHERE address = $1 AND scope = 'marketing' AND reason = 'unsubscribe'`, jane); n != 1 {
		t.Fatalf("%d audit rows for the marketing lift, want 1", n)
	}
	if code, _ := h.admin(http.MethodDelete, "/v1/suppressions/"+bob+"?scope=global", `{"reason":"mailbox back"}`); code != 200 {
		t.Fatalf("lift bob's global: %d", code)
	}
	if got, _ := check(bob, "marketing"); got {
		t.Error("bob is still suppressed after his only (global) row was lifted")
	}
}
