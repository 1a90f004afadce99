package notify_test

import (
	"testing"

	"github.com/mailhook/mailhook/internal/notify"
)

// A body as jsonb gives it back (keys by length) is sent in the documented order, and what the
// structs do not name is kept, after the rest.
func TestOrderedPutsTheDocumentedFieldsFirst(t *testing.T) {
	jsonb := `{"id": "ntf_1", "data": {"status": "bounced", "version": 2, "event_id": "evt_1", "provider": "postscale", "recipient": "a@example.com", "event_type": "email.bounced", "message_id": "msg_1", "occurred_at": "2026-12-01T10:00:00Z", "previous_status": "delivered", "body_removed_at": "x"}, "type": "message.status_changed", "created_at": "2026-12-01T10:00:01Z"}`
	want := `{"id":"ntf_1","type":"message.status_changed","created_at":"2026-12-01T10:00:01Z","data":{"provider":"postscale","message_id":"msg_1","recipient":"a@example.com","status":"bounced","previous_status":"delivered","version":2,"event_id":"evt_1","event_type":"email.bounced","occurred_at":"2026-12-01T10:00:00Z","body_removed_at":"x"}}`
	got := string(notify.Ordered([]byte(jsonb)))
	if got != want {
		t.Fatalf("ordered:\n got %s\nwant %s", got, want)
	}
	if again := string(notify.Ordered([]byte(got))); again != got {
		t.Fatalf("ordering twice changed it:\n%s\n%s", got, again)
	}
	for _, odd := range []string{`null`, `[1,2]`, `"x"`, `not json`} {
		if got := string(notify.Ordered([]byte(odd))); got != odd {
			t.Errorf("Ordered(%s) = %s, want it unchanged", odd, got)
		}
	}
}

func BenchmarkOrdered(b *testing.B) {
	jsonb := []byte(`{"id": "ntf_1", "data": {"status": "bounced", "version": 2, "event_id": "evt_1", "provider": "postscale", "recipient": "a@example.com", "event_type": "email.bounced", "message_id": "msg_1", "occurred_at": "2026-12-01T10:00:00Z", "previous_status": "delivered"}, "type": "message.status_changed", "created_at": "2026-12-01T10:00:01Z"}`)
	for b.Loop() {
		notify.Ordered(jsonb)
	}
}
