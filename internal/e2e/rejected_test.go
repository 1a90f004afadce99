package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The process keeps a refused request with its cause (serve wires the recorder into the
// handler and runs its writer with acceptance), lists it over /v1 without its secret-bearing
// headers, and a retry under the same config is still refused, with the cause.
func TestTheProcessKeepsARefusedRequestWithItsCause(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	body := h.envelope(h.id("refused"), "email.delivered", h.id("msg_refused"), time.Now(), "")
	if status, _ := h.postSigned(body, "whsec_not-the-endpoints-secret", time.Now()); status != 401 {
		t.Fatalf("badly signed: %d, want 401", status)
	}
	var list []any
	waitUntil(t, "the refusal kept", func() bool {
		status, out := h.admin("GET", "/v1/rejections?endpoint=postscale&cause=bad_signature", "")
		list, _ = out["rejections"].([]any)
		return status == 200 && len(list) == 1
	})
	kept := list[0].(map[string]any)
	if kept["status"] != float64(401) || kept["provider"] != "postscale" || kept["body"] != nil {
		t.Errorf("kept: %v", kept)
	}
	id := int(kept["id"].(float64))
	status, one := h.admin("GET", fmt.Sprint("/v1/rejections/", id), "")
	if status != 200 || one["body"] == nil {
		t.Fatalf("GET /v1/rejections/%d: %d %v", id, status, one)
	}
	status, out := h.admin("POST", fmt.Sprintf("/v1/rejections/%d/retry", id), "")
	if reason, _ := out["reason"].(string); status != 409 || !strings.Contains(reason, "bad_signature") {
		t.Errorf("retry under the same config: %d %v, want 409 naming bad_signature", status, out)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1`, h.id("refused")); n != 0 {
		t.Errorf("the refused event was stored (%d rows)", n)
	}
}
