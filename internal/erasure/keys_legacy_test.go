package erasure

import (
	"encoding/json"
	"testing"

	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/postmark"
	"github.com/mailhook/mailhook/internal/provider/ses"
)

// priorKeys are the providers' rules, as serve wires them.
var priorKeys = PriorKeys{
	EventIDs:   map[string]func(string) (string, bool){postmark.Name: postmark.CurrentEventID, ses.Name: ses.CurrentEventID},
	MessageIDs: map[string]func(string) (string, bool){ses.Name: ses.CurrentMessageID},
}

// Only a prior version's key that holds the erased address is re-keyed, to what the provider's
// parser gives the same event now; the normalized event names the new keys.
func TestReKeysOnlyPriorKeysOfTheAddress(t *testing.T) {
	m, err := NewMatcher("jane@example.com")
	if err != nil {
		t.Fatal(err)
	}
	m.WithPriorKeys(priorKeys)
	tag := provider.RecipientTag("sns1", "jane@example.com")
	cases := []struct {
		provider, id, want string
		ok                 bool
	}{
		{"ses", "sns1:jane@example.com", "sns1:" + tag, true},
		{"ses", "sns1:bob@example.com", "", false},       // someone else's
		{"ses", "sns1:" + tag, "", false},                // keyed by this version already
		{"postscale", "evt:jane@example.com", "", false}, // never keyed by the address
		{"postmark", "Open:m1:Jane@Example.com:2026-12-01T10:00:00Z", "Open:m1:2026-12-01T10:00:00Z:" + provider.RecipientTag("m1", "Jane@Example.com"), true},
	}
	for _, c := range cases {
		got, ok := m.EventID(c.provider, c.id)
		if got != c.want || ok != c.ok {
			t.Errorf("EventID(%s, %s) = %q, %v; want %q, %v", c.provider, c.id, got, ok, c.want, c.ok)
		}
	}
	if got, ok := m.MessageID("postmark", "m1:jane@example.com"); ok {
		t.Errorf("a Postmark message key was never keyed by the address: %q", got)
	}

	doc := `{"provider":"ses","event_id":"sns1:jane@example.com","message_id":"mail1:jane@example.com","prior_message_id":"mail1:jane@example.com","recipient":"jane@example.com"}`
	out, changed, err := m.RedactEvent([]byte(doc))
	if err != nil || !changed {
		t.Fatalf("RedactEvent = %s, %v, %v", out, changed, err)
	}
	var ev map[string]string
	if err := json.Unmarshal(out, &ev); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"provider": "ses", "event_id": "sns1:" + tag, "message_id": "mail1:" + provider.RecipientTag("mail1", "jane@example.com")}
	if len(ev) != len(want) || ev["event_id"] != want["event_id"] || ev["message_id"] != want["message_id"] {
		t.Fatalf("redacted event %v; want %v", ev, want)
	}
}
