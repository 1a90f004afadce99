package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
)

// What the Temporal UI shows of a run, step by step: a local activity's marker carries no input,
// so each step says what it does in its summary and what it did in its result (issue 27). A
// delivered event notifies the sink: Process, one SendNotification, MarkProcessed.
func TestEachStepSaysWhatItDidInTheTemporalUI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	evID := h.id("evt_ui")
	if code, resp := h.post(h.envelope(evID, "email.delivered", h.id("msg_ui"), time.Now(), "")); code != 200 {
		t.Fatalf("post: %d %v", code, resp)
	}
	wf := "postscale:" + evID
	if err := h.waitWorkflow(wf); err != nil {
		t.Fatalf("%s: %v", wf, err)
	}
	// The sink gets the body in the documented order (docs/API.md), not the order jsonb keeps.
	h.waitDelivered(1)
	raw := string(h.sink.delivered()[0].Raw)
	last := -1
	for _, key := range []string{`"id"`, `"type"`, `"created_at"`, `"data"`, `"provider"`, `"message_id"`, `"recipient"`, `"status"`, `"previous_status"`, `"version"`, `"event_id"`} {
		i := strings.Index(raw, key)
		if i <= last {
			t.Fatalf("the sink got %s with %s out of the documented order", raw, key)
		}
		last = i
	}
	dc := converter.GetDefaultDataConverter()
	type step struct{ summary, result string }
	steps := map[string][]step{}
	for _, ev := range history(t, h.svc.Temporal, wf) {
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil {
			continue
		}
		var data struct{ ActivityType string }
		if err := dc.FromPayloads(m.GetDetails()["data"], &data); err != nil {
			t.Fatalf("marker data: %v", err)
		}
		var s step
		if sum := ev.GetUserMetadata().GetSummary(); sum != nil {
			if err := dc.FromPayload(sum, &s.summary); err != nil {
				t.Fatalf("summary of %s: %v", data.ActivityType, err)
			}
		}
		if ps := m.GetDetails()["result"].GetPayloads(); len(ps) > 0 {
			s.result = string(ps[0].GetData())
		}
		steps[data.ActivityType] = append(steps[data.ActivityType], s)
	}
	want := map[string]struct{ summary, result []string }{
		"Process":          {[]string{"apply to its message"}, []string{`"kind":"status"`, `"outcome":"moved"`, `"to":"delivered"`, `"version":`}},
		"SendNotification": {[]string{"message.status_changed → "}, []string{`"id":"ntf_`, `"sink":"`, `"type":"message.status_changed"`, `"sent":true`, `"http_status":200`, `"attempt":1`}},
		"MarkProcessed":    {[]string{"mark processed: 0 of 1 notifications failed for good, 0 parked"}, nil},
	}
	for name, w := range want {
		got := steps[name]
		if len(got) != 1 {
			t.Errorf("%s: %d markers, want 1 (steps %v)", name, len(got), steps)
			continue
		}
		for _, s := range w.summary {
			if !strings.Contains(got[0].summary, s) {
				t.Errorf("%s's summary %q lacks %q", name, got[0].summary, s)
			}
		}
		for _, s := range w.result {
			if !strings.Contains(got[0].result, s) {
				t.Errorf("%s's result %s lacks %s", name, got[0].result, s)
			}
		}
		if w.result != nil && !json.Valid([]byte(got[0].result)) {
			t.Errorf("%s's result is not JSON: %q", name, got[0].result)
		}
	}
}
