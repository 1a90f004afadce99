package simulate

import (
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
)

// The simulated body holds each mapped value at its configured path, through objects and arrays
// as fieldmap reads them; unconfigured paths are left out.
func TestWriteFieldsPutsEachValueAtItsPath(t *testing.T) {
	body, err := writeFields([]field{
		{"type_field", "event", "bounce"},
		{"message_id_field", "data.0.message.id", "m1"},
		{"recipient_field", "data.0.to", Recipient},
		{"occurred_at_field", "", "never written"},
		{"diagnostic_field", "data.0.bounce.reason", diagnostic},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"data":[{"bounce":{"reason":"` + diagnostic + `"},"message":{"id":"m1"},"to":"user@example.com"}],"event":"bounce"}`
	if string(body) != want {
		t.Errorf("body\n%s\nwant\n%s", body, want)
	}
}

// Two fields at one path, or one inside the other, cannot both be written: the error names the
// setting, so the operator sees which mapping simulate cannot play.
func TestWriteFieldsRefusesOverlappingPaths(t *testing.T) {
	for _, fs := range [][]field{
		{{"message_id_field", "data.id", "m1"}, {"event_id_field", "data.id", "e1"}},
		{{"recipient_field", "data", Recipient}, {"message_id_field", "data.id", "m1"}},
		{{"message_id_field", "data.id", "m1"}, {"recipient_field", "data", Recipient}},
		{{"message_id_field", "data.to.0", "m1"}, {"recipient_field", "data.to.x", Recipient}},
	} {
		_, err := writeFields(fs)
		if err == nil || !strings.Contains(err.Error(), "generic."+fs[1].key) {
			t.Errorf("%v: error %v, want one naming generic.%s", fs, err, fs[1].key)
		}
	}
}

// A generic endpoint simulate cannot play says why, naming the setting.
func TestGenericSpeakerNamesWhatItLacks(t *testing.T) {
	ok := map[string]string{"delivered": "delivered", "bounce": "bounced"}
	for _, c := range []struct {
		provider string
		g        *config.Generic
		want     string
	}{
		{"hmac", nil, "generic: block"},
		{"standard-webhooks", &config.Generic{MessageIDField: "id", StatusMap: map[string]string{"delivered": "delivered"}}, "status_map"},
		{"hmac", &config.Generic{MessageIDField: "id", StatusMap: ok}, "signature_header"},
		{"hmac", &config.Generic{SignatureHeader: "X-Sig", Signed: "timestamp_body", MessageIDField: "id", StatusMap: ok}, "timestamp_header"},
		{"hmac", &config.Generic{SignatureHeader: "X-Sig", Algorithm: "md5", MessageIDField: "id", StatusMap: ok}, "algorithm"},
		{"hmac", &config.Generic{SignatureHeader: "X-Sig", EventIDField: "id", MessageIDField: "id", StatusMap: ok}, "event_id_field"},
	} {
		if _, err := genericSpeaker(c.provider, c.g); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: error %v, want one naming %s", c.provider, c.g, err, c.want)
		}
	}
	// Without a type for accepted, the delivery and the bounce alone, and the delivery's retry.
	sp, err := genericSpeaker("standard-webhooks", &config.Generic{MessageIDField: "id", StatusMap: ok})
	if err != nil {
		t.Fatal(err)
	}
	steps := sp.steps("m1", time.Now())
	if len(steps) != 3 || sp.events != 2 || steps[1].ID != steps[2].ID || string(steps[1].Body) != string(steps[2].Body) {
		t.Errorf("steps %+v, events %d: want a bounce, a delivery and its retry (same id, same body), 2 events", steps, sp.events)
	}
}
