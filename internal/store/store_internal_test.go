package store

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
)

func TestPayloadColumnsStoreTheRawJSONOnce(t *testing.T) {
	raw := json.RawMessage(`{"type":"email.delivered","data":{"id":"m1"}}`)
	payload, event := payloadColumns(domain.Event{EventID: "e1", Raw: raw})
	assert.JSONEq(t, string(raw), payload)
	require.IsType(t, "", event)
	assert.NotContains(t, event.(string), "m1", "the normalized event does not repeat the raw JSON")
	var back domain.Event
	require.NoError(t, json.Unmarshal([]byte(event.(string)), &back))
	assert.Equal(t, "e1", back.EventID)
	assert.JSONEq(t, "null", string(back.Raw))

	ev, err := stored{event: []byte(event.(string)), payload: []byte(payload), kept: true}.decode()
	require.NoError(t, err)
	assert.JSONEq(t, string(raw), string(ev.Raw), "decode puts the raw JSON back")

	payload, _ = payloadColumns(domain.Event{EventID: "e2", Raw: json.RawMessage(" ")})
	assert.Equal(t, "null", payload, "no raw JSON: JSON null, not a copy of the event")

	_, err = stored{event: []byte(`{"event_id":"e3","kind":"inbound","body_removed_at":"2026-12-01T00:00:00+00:00"}`),
		payload: []byte(jsonNull), kept: true}.decode()
	assert.ErrorIs(t, err, ErrBodyRemoved, "an inbound email whose body was removed cannot be processed again")
	_, err = stored{legacy: []byte(`{"event_id":"e4","kind":"inbound","raw":null,"body_removed_at":"2026-12-01T00:00:00+00:00"}`),
		kept: true}.decode()
	assert.ErrorIs(t, err, ErrBodyRemoved, "in the legacy columns too")

	_, err = stored{}.decode()
	assert.ErrorIs(t, err, ErrPayloadExpired)
	_, err = stored{kept: true}.decode()
	assert.ErrorIs(t, err, ErrNotNormalized)
}

// The stored event's metadata, written without encoding/json's map encoder, is the JSON
// json.Marshal writes for it (jsonb keeps no key order), escapes included, and decodes back to
// the same event; a NUL is still refused as jsonb would refuse it.
func TestNormalizedEventWritesMetadataAsJSONDoes(t *testing.T) {
	for _, md := range []map[string]string{
		{"order_id": "A-17", "customer": "c_42", "attempt": "2"},
		{`q"uote`: `back\slash`, "html": "<a href='x'>&amp;</a>", "ctl": "tab\tnew\nline", "é": "ünïcode ✓", "": ""},
		{"bad utf-8": "\xff\xfe", "sep": "\u2028\u2029"},
	} {
		ev := domain.Event{Provider: "postscale", EventID: "e1", Type: "email.delivered", Metadata: md,
			Tags: []string{"a"}, Raw: json.RawMessage(`{"x":1}`)}
		_, got := payloadColumns(ev)
		require.IsType(t, "", got)
		ev.Raw = nil
		want, err := json.Marshal(ev)
		require.NoError(t, err)
		assert.JSONEq(t, string(want), got.(string))
		var back domain.Event
		require.NoError(t, json.Unmarshal([]byte(got.(string)), &back))
		var wantBack domain.Event
		require.NoError(t, json.Unmarshal(want, &wantBack))
		assert.Equal(t, wantBack, back)
	}
	_, got := payloadColumns(domain.Event{EventID: "e2", Metadata: map[string]string{"k": "a\x00b"}})
	assert.Nil(t, got, "a NUL in the metadata: no normalized form, as before")
	_, got = payloadColumns(domain.Event{EventID: "e3"})
	assert.NotContains(t, got.(string), "metadata", "no metadata: no member")
}
