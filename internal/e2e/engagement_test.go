package e2e_test

import (
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
)

// TestEngagementReachesOnlyTheSinksThatAskForIt: a sink that lists message.opened and
// message.clicked gets one notification per open and per click, with the link, the user agent
// and (engagement_ip) the IP; the sink that does not list them gets only the status change, as
// before. An open or a click notified costs what a status change costs: one workflow task and no
// activity task.
func TestEngagementReachesOnlyTheSinksThatAskForIt(t *testing.T) {
	t.Parallel()
	analytics := newReceiver(t)
	h := newHarness(t, harnessOptions{sinks: func(s []config.Sink) []config.Sink {
		return append(s, config.Sink{Name: "analytics", URL: analytics.srv.URL, Secret: sinkSecret, EngagementIP: true,
			Types: []string{domain.TypeMessageOpened, domain.TypeMessageClicked}})
	}})
	msg := h.id("msg_engaged")
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	delivered, opened, clicked := h.id("evt_e_delivered"), h.id("evt_e_opened"), h.id("evt_e_clicked")
	for _, c := range []struct{ id, typ, extra string }{
		{delivered, "email.delivered", ""},
		{opened, "email.opened", `,"user_agent":"Mozilla/5.0 (iPhone)","ip":"192.0.2.7"`},
		{clicked, "email.clicked", `,"link":"https://example.com/offer","user_agent":"Mozilla/5.0 (iPhone)","ip":"192.0.2.7"`},
	} {
		if code, resp := h.post(h.envelope(c.id, c.typ, msg, at, c.extra)); code != 200 || resp["status"] != "accepted" {
			t.Fatalf("%s: %d %v", c.typ, code, resp)
		}
	}
	h.waitProcessed(delivered, opened, clicked)
	waitUntil(t, "the analytics sink's two notifications", func() bool { return len(analytics.delivered()) >= 2 })

	got := map[string]map[string]any{}
	for _, d := range analytics.delivered() {
		got[d.Body["type"].(string)] = d.Body["data"].(map[string]any)
	}
	if len(analytics.delivered()) != 2 || got[domain.TypeMessageOpened] == nil || got[domain.TypeMessageClicked] == nil {
		t.Fatalf("analytics got %v, want one message.opened and one message.clicked", got)
	}
	if o := got[domain.TypeMessageOpened]; o["user_agent"] != "Mozilla/5.0 (iPhone)" || o["ip"] != "192.0.2.7" ||
		o["message_id"] != msg || o["event_id"] != opened || o["url"] != nil {
		t.Errorf("message.opened data %v", o)
	}
	if c := got[domain.TypeMessageClicked]; c["url"] != "https://example.com/offer" || c["ip"] != "192.0.2.7" || c["event_id"] != clicked {
		t.Errorf("message.clicked data %v", c)
	}
	// The sink that did not ask gets the status change only, as before engagement existed.
	for _, d := range h.sink.delivered() {
		if typ := d.Body["type"]; typ != domain.TypeStatusChanged {
			t.Errorf("app sink got a %v", typ)
		}
	}
	for _, id := range []string{delivered, opened, clicked} {
		wf := "postscale:" + id
		wt, at, n := shape(t, h, wf)
		t.Logf("%s: %d workflow tasks, %d activity tasks, %d events, %d bytes", wf, wt, at, n, historyBytes(t, h, wf))
		if wt != 1 || at != 0 {
			t.Errorf("%s: %d workflow tasks and %d activity tasks, want 1 and 0", wf, wt, at)
		}
	}
}
