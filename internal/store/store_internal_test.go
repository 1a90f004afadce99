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
