package e2e_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape returns the value of one series from /metrics, 0 when it is absent.
func (h *harness) scrape(series string) float64 {
	h.t.Helper()
	resp, err := http.Get(h.api.URL + "/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`)
	m := re.FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

func TestMetricsMoveWithTraffic(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	evID := h.id("evt_metrics")
	body := h.envelope(evID, "email.delivered", h.id("msg_metrics"), time.Now(), "")
	h.post(body)
	h.post(body)
	h.postSigned(body, "whsec_wrong", time.Now())
	h.do(signedRequest(t, h.api.URL+"/webhooks/nope", body))
	h.do(signedRequest(t, h.api.URL+"/webhooks/postscale", `{"id":"x","pad":"`+strings.Repeat("x", 2<<20)+`"}`))
	h.do(signedRequest(t, h.api.URL+"/webhooks/postscale", `not json`))
	if err := h.waitWorkflow("postscale:" + evID); err != nil {
		t.Fatal(err)
	}

	want := map[string]float64{
		`mailhook_webhook_requests_total{endpoint="postscale",outcome="accepted",provider="postscale"}`:          1,
		`mailhook_webhook_requests_total{endpoint="postscale",outcome="duplicate",provider="postscale"}`:         1,
		`mailhook_webhook_requests_total{endpoint="postscale",outcome="invalid_signature",provider="postscale"}`: 1,
		`mailhook_webhook_requests_total{endpoint="postscale",outcome="too_large",provider="postscale"}`:         1,
		`mailhook_webhook_requests_total{endpoint="postscale",outcome="bad_request",provider="postscale"}`:       1,
		`mailhook_webhook_requests_total{endpoint="unknown",outcome="unknown_endpoint",provider=""}`:             1,
		`mailhook_webhook_request_duration_seconds_count{endpoint="postscale",outcome="accepted"}`:               1,
		`mailhook_events_processed_total{provider="postscale",result="moved"}`:                                   1,
		`mailhook_notifications_total{outcome="sent",sink="app"}`:                                                1,
		`mailhook_notification_attempts_count{sink="app"}`:                                                       1,
		`mailhook_unprocessed_events`: 0,
	}
	for series, v := range want {
		if got := h.scrape(series); got != v {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}
}
