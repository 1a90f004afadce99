package activities_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/event"
	"github.com/mailhook/mailhook/internal/store"
)

func TestSuppressionAddedBody(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	// An unsubscribe that names no recipient: the address is the one the message recorded,
	// exactly as ApplyStatus chose it.
	ev := event.Event{Provider: "postscale", EventID: "evt_u", Type: "email.unsubscribed", Kind: event.KindUnsubscribed, MessageID: "msg_1"}
	in := activities.NotifyInput{Sink: "ops", Type: config.TypeSuppressionAdded, Event: ev,
		Apply: store.ApplyResult{Outcome: store.OutcomeFlagged, Recipient: "User@Example.com", Suppressed: true}}
	body, err := activities.Body("ntf_x", in, now)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"ntf_x","type":"suppression.added","created_at":"2026-11-29T10:00:00Z",
		"data":{"address":"user@example.com","reason":"unsubscribe","provider":"postscale","event_id":"evt_u","message_id":"msg_1"}}`, string(body))

	in.Event.Kind = event.KindOpened
	_, err = activities.Body("ntf_x", in, now)
	assert.Error(t, err, "an event that suppresses nothing has no suppression.added body")
}

func TestCorrectionStatusChangedBody(t *testing.T) {
	ev := event.Event{Provider: "postscale", EventID: "correction-ab", Type: event.CorrectionType, Kind: event.KindCorrection,
		Status: event.StatusDelivered, MessageID: "msg_1", OccurredAt: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)}
	in := activities.NotifyInput{Sink: "app", Type: config.TypeStatusChanged, Event: ev,
		Apply: store.ApplyResult{Outcome: store.OutcomeMoved, From: event.StatusBounced, To: event.StatusDelivered, Recipient: "u@example.com", Version: 3}}
	body, err := activities.Body("ntf_y", in, time.Now())
	require.NoError(t, err)
	var env struct {
		Data activities.StatusChanged `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &env))
	assert.Equal(t, event.StatusDelivered, env.Data.Status)
	assert.Equal(t, event.StatusBounced, env.Data.PreviousStatus)
	assert.Equal(t, int64(3), env.Data.Version)
	assert.Equal(t, event.CorrectionType, env.Data.EventType)
}
