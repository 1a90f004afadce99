package loadgen

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNotificationLatency(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	sent := map[string]time.Time{
		"postscale:evt_1":                 t0,
		"postscale:evt_2":                 t0.Add(time.Second),
		"postscale:email.received:in_1":   t0.Add(2 * time.Second),
		"sendgrid:sg1":                    t0.Add(3 * time.Second),
		"postscale:evt_never_notified_of": t0,
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	received := map[string]Notification{
		// 100 ms after its event was sent.
		"ntf_a": {ID: "ntf_a", Type: typeStatusChanged, Provider: "postscale", EventID: "evt_1", First: t0.Add(ms(100))},
		// The same event's suppression.added, later.
		"ntf_b": {ID: "ntf_b", Type: "suppression.added", Provider: "postscale", EventID: "evt_1", First: t0.Add(ms(900))},
		"ntf_c": {ID: "ntf_c", Type: typeStatusChanged, Provider: "postscale", EventID: "evt_2", First: t0.Add(time.Second + ms(300))},
		"ntf_d": {ID: "ntf_d", Type: "email.received", Provider: "postscale", EventID: "email.received:in_1", First: t0.Add(2*time.Second + ms(200))},
		// SendGrid: the provider is part of the key (an event id of the same spelling under
		// another provider is another event).
		"ntf_e": {ID: "ntf_e", Type: typeStatusChanged, Provider: "sendgrid", EventID: "sg1", First: t0.Add(3*time.Second + ms(50))},
		// Not this run's, or no event id: left out and counted.
		"ntf_f": {ID: "ntf_f", Type: typeStatusChanged, Provider: "postscale", EventID: "evt_other_run", First: t0},
		"ntf_g": {ID: "ntf_g", Type: typeStatusChanged, Provider: "sendgrid", EventID: "evt_1", First: t0},
		"ntf_h": {ID: "ntf_h", Type: "report.daily", First: t0},
		// A receipt before the send (cannot happen with one clock) counts as zero, not negative.
		"ntf_i": {ID: "ntf_i", Type: typeStatusChanged, Provider: "postscale", EventID: "evt_2", First: t0},
	}
	l := notificationLatency(received, sent)
	if l.Count != 6 || l.Unmatched != 3 {
		t.Fatalf("count %d unmatched %d, want 6 and 3", l.Count, l.Unmatched)
	}
	// Sorted: 0, 50, 100, 200, 300, 900 ms. Nearest rank: p50 = 3rd = 100 ms, p95 and p99 = 6th.
	if l.P50 != ms(100) || l.P95 != ms(900) || l.P99 != ms(900) || l.Max != ms(900) {
		t.Fatalf("p50 %s p95 %s p99 %s max %s", l.P50, l.P95, l.P99, l.Max)
	}
	if want := ms(1550) / 6; l.Mean != want {
		t.Fatalf("mean %s, want %s", l.Mean, want)
	}
	if s := l.ByType[typeStatusChanged]; s.Count != 4 || s.Max != ms(300) || s.P50 != ms(50) {
		t.Fatalf("status_changed %+v", s)
	}
	if s := l.ByType["suppression.added"]; s.Count != 1 || s.P99 != ms(900) {
		t.Fatalf("suppression.added %+v", s)
	}
	if s := l.ByType["email.received"]; s.Count != 1 || s.P99 != ms(200) {
		t.Fatalf("email.received %+v", s)
	}
	if empty := notificationLatency(nil, sent); empty.Count != 0 || empty.P99 != 0 || empty.ByType != nil {
		t.Fatalf("no notifications: %+v", empty)
	}

	path := filepath.Join(t.TempDir(), "latency.csv")
	if err := writeLatencies(path, received, sent); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 7 || lines[0] != "sent_unix_ms,latency_ms,type,id" {
		t.Fatalf("%q", lines)
	}
	// Sorted by the send: evt_1's two notifications (in either order) come first.
	if !strings.HasPrefix(lines[1], unixMS(t0)) || !strings.HasSuffix(lines[6], ",50.000,message.status_changed,ntf_e") {
		t.Fatalf("%q", lines)
	}
}

func unixMS(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) + "," }

// The runner books the first send of every event a request carries, and keeps the earliest.
func TestFirstSends(t *testing.T) {
	r := &runner{ev: map[*Event]*evState{}}
	a := &Event{Provider: "sendgrid", EventID: "sg1"}
	b := &Event{Provider: "sendgrid", EventID: "sg2"}
	t0 := time.Now()
	r.markSent(&Request{Events: []*Event{a, b}}, t0.Add(time.Second))
	r.markSent(&Request{Events: []*Event{a}}, t0) // a concurrent copy that got there first
	r.markSent(&Request{Events: []*Event{b}}, t0.Add(time.Minute))
	got := r.firstSends()
	if !got["sendgrid:sg1"].Equal(t0) || !got["sendgrid:sg2"].Equal(t0.Add(time.Second)) || len(got) != 2 {
		t.Fatalf("%v", got)
	}
}
