package store

import (
	"encoding/json"
	"testing"
	"time"

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

func TestApplyEventEngagementKeepsEarliestTime(t *testing.T) {
	t1 := time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)
	t0 := t1.Add(-time.Hour)
	now := t1.Add(time.Hour)

	row := messageRow{Status: domain.StatusDelivered, Version: 1}
	next, res, changed, err := applyEvent(row, domain.Event{Kind: domain.KindOpened, OccurredAt: t1}, now)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, domain.OutcomeCounted, res.Outcome)
	assert.Equal(t, domain.StatusDelivered, res.From)
	assert.Equal(t, domain.StatusDelivered, res.To)
	assert.Equal(t, int64(1), res.Version)
	assert.Equal(t, int64(1), next.Opens)
	assert.True(t, next.FirstOpenedAt.Equal(t1))

	// An older open arriving late moves "first opened" back.
	next, _, _, err = applyEvent(next, domain.Event{Kind: domain.KindOpened, OccurredAt: t0}, now)
	require.NoError(t, err)
	assert.Equal(t, int64(2), next.Opens)
	assert.True(t, next.FirstOpenedAt.Equal(t0))

	// No provider time: fall back to now, which is later, so t0 stays.
	next, _, _, err = applyEvent(next, domain.Event{Kind: domain.KindOpened}, now)
	require.NoError(t, err)
	assert.True(t, next.FirstOpenedAt.Equal(t0))
}

func TestApplyEventStaleWritesNothingUnlessRecipientLearnt(t *testing.T) {
	at := time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)
	row := messageRow{Status: domain.StatusDelivered, OrderRank: 30, OrderOccurredAt: &at, OrderEventID: "b", Version: 1}
	old := domain.Event{Kind: domain.KindStatus, EventID: "a", Status: domain.StatusAccepted, OccurredAt: at}

	_, res, changed, err := applyEvent(row, old, at)
	require.NoError(t, err)
	assert.False(t, changed)
	assert.Equal(t, domain.OutcomeStale, res.Outcome)

	old.Recipient = "to@example.com"
	next, res, changed, err := applyEvent(row, old, at)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, domain.OutcomeStale, res.Outcome)
	assert.Equal(t, "to@example.com", next.Recipient)
	assert.Equal(t, "to@example.com", res.Recipient)
}

func TestApplyEventRejectsOtherKinds(t *testing.T) {
	for _, k := range []domain.Kind{domain.KindInbound, domain.KindUnknown, ""} {
		_, _, _, err := applyEvent(messageRow{}, domain.Event{Kind: k}, time.Now())
		assert.Error(t, err, "kind %q", k)
	}
}
