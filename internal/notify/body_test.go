package notify_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/notify"
)

func TestSuppressionAddedBody(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	// An unsubscribe that names no recipient: the address is the one the message recorded,
	// exactly as ApplyStatus chose it.
	ev := domain.Event{Provider: "postscale", EventID: "evt_u", Type: "email.unsubscribed", Kind: domain.KindUnsubscribed, MessageID: "msg_1"}
	in := notify.Input{Type: domain.TypeSuppressionAdded, Event: ev,
		Applied: notify.Applied{Recipient: "User@Example.com"}}
	body, err := notify.Body("ntf_x", in, now)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"ntf_x","type":"suppression.added","created_at":"2026-11-29T10:00:00Z",
		"data":{"address":"user@example.com","scope":"global","reason":"unsubscribe","provider":"postscale","event_id":"evt_u","message_id":"msg_1"}}`, string(body))

	// From a stream config maps to a scope, the unsubscribe suppressed in that scope only, and
	// the notification says so.
	in.Event.Stream, in.SuppressionScopes = "broadcast", map[string]string{"broadcast": "marketing"}
	body, err = notify.Body("ntf_x", in, now)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"ntf_x","type":"suppression.added","created_at":"2026-11-29T10:00:00Z",
		"data":{"address":"user@example.com","scope":"marketing","reason":"unsubscribe","provider":"postscale","event_id":"evt_u","message_id":"msg_1"}}`, string(body))
	in.Event.Stream, in.SuppressionScopes = "", nil

	in.Event.Kind = domain.KindOpened
	_, err = notify.Body("ntf_x", in, now)
	assert.Error(t, err, "an event that suppresses nothing has no suppression.added body")
}

func TestCorrectionStatusChangedBody(t *testing.T) {
	ev := domain.Event{Provider: "postscale", EventID: "correction-ab", Type: domain.CorrectionType, Kind: domain.KindCorrection,
		Status: domain.StatusDelivered, MessageID: "msg_1", OccurredAt: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)}
	in := notify.Input{Type: domain.TypeStatusChanged, Event: ev,
		Applied: notify.Applied{From: domain.StatusBounced, To: domain.StatusDelivered, Recipient: "u@example.com", Version: 3}}
	body, err := notify.Body("ntf_y", in, time.Now())
	require.NoError(t, err)
	var env struct {
		Data notify.StatusChanged `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &env))
	assert.Equal(t, domain.StatusDelivered, env.Data.Status)
	assert.Equal(t, domain.StatusBounced, env.Data.PreviousStatus)
	assert.Equal(t, int64(3), env.Data.Version)
	assert.Equal(t, domain.CorrectionType, env.Data.EventType)
}

func TestStatusChangedBodyCarriesTheBounce(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	b := &domain.Bounce{SMTPCode: 550, EnhancedCode: "5.1.1", Diagnostic: "550 5.1.1 <user@example.com>: Recipient address rejected", Category: "unknown_user"}
	ev := domain.Event{Provider: "postscale", EventID: "evt_b", Type: "email.bounced", Kind: domain.KindStatus,
		Status: domain.StatusBounced, BounceType: domain.BounceHard, MessageID: "msg_1", Recipient: "user@example.com",
		OccurredAt: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), Bounce: b}
	in := notify.Input{Type: domain.TypeStatusChanged, Event: ev,
		Applied: notify.Applied{From: domain.StatusDelivered, To: domain.StatusBounced,
			BounceType: domain.BounceHard, Recipient: "user@example.com", Version: 2}}
	body, err := notify.Body("ntf_b", in, now)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"ntf_b","type":"message.status_changed","created_at":"2026-11-29T10:00:00Z",
		"data":{"provider":"postscale","message_id":"msg_1","recipient":"user@example.com","status":"bounced",
		"previous_status":"delivered","bounce_type":"hard","version":2,"event_id":"evt_b","event_type":"email.bounced",
		"occurred_at":"2026-11-29T09:00:00Z",
		"bounce":{"smtp_code":550,"enhanced_code":"5.1.1","diagnostic":"550 5.1.1 <user@example.com>: Recipient address rejected","category":"unknown_user"}}}`,
		string(body))

	// A failure carries it too.
	in.Event.Status, in.Event.Type, in.Applied.To, in.Applied.BounceType = domain.StatusFailed, "email.failed", domain.StatusFailed, ""
	body, err = notify.Body("ntf_f", in, now)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"bounce":{"smtp_code":550`)

	// Details on an event that moved to another status are not a bounce's.
	in.Event.Status, in.Applied.To = domain.StatusDelivered, domain.StatusDelivered
	body, err = notify.Body("ntf_d", in, now)
	require.NoError(t, err)
	assert.NotContains(t, string(body), `"bounce"`)

	// A bounce whose provider said nothing has no bounce object.
	in.Event.Status, in.Applied.To, in.Event.Bounce = domain.StatusBounced, domain.StatusBounced, nil
	body, err = notify.Body("ntf_n", in, now)
	require.NoError(t, err)
	assert.NotContains(t, string(body), `"bounce"`)
}

func TestSuppressionAddedBodyForTheSoftBounceThreshold(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	// A soft bounce suppresses only by reaching the threshold: that is the reason named.
	ev := domain.Event{Provider: "postscale", EventID: "evt_s3", Type: "email.bounced", Kind: domain.KindStatus,
		Status: domain.StatusBounced, BounceType: domain.BounceSoft, MessageID: "msg_3", Recipient: "Soft@Example.com",
		Stream: "marketing"}
	in := notify.Input{Type: domain.TypeSuppressionAdded, Event: ev,
		Applied:           notify.Applied{To: domain.StatusBounced, BounceType: domain.BounceSoft},
		SuppressionScopes: map[string]string{"marketing": "marketing"}}
	body, err := notify.Body("ntf_s", in, now)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"ntf_s","type":"suppression.added","created_at":"2026-11-29T10:00:00Z",
		"data":{"address":"soft@example.com","scope":"global","reason":"soft_bounce_threshold","provider":"postscale",
		"event_id":"evt_s3","message_id":"msg_3"}}`, string(body))

	// The same routing the Process step uses: a suppressing soft bounce is notified.
	r := domain.Route(config.Config{Sinks: []config.Sink{{Name: "ops", Types: []string{domain.TypeSuppressionAdded}}}}.SinksFor)
	assert.Equal(t, []domain.Notification{{Type: domain.TypeSuppressionAdded, Sink: "ops"}},
		domain.Notifications(r, ev.Kind, domain.OutcomeStale, true))
}

// An event fetched back from the provider's API (internal/backfill) says so in its
// notifications; a webhook's notifications have no source field at all, as before.
func TestBackfilledEventsNotificationsSaySource(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	ev := domain.Event{Provider: "mailgun", EventID: "ev1:2026-11-29", Type: "failed", Kind: domain.KindStatus,
		Status: domain.StatusBounced, BounceType: domain.BounceHard, MessageID: "msg_1", Recipient: "user@example.com",
		OccurredAt: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)}
	status := notify.Input{Type: domain.TypeStatusChanged, Event: ev,
		Applied: notify.Applied{From: domain.StatusDelivered, To: domain.StatusBounced,
			BounceType: domain.BounceHard, Recipient: "user@example.com", Version: 2}}
	suppressed := status
	suppressed.Type = domain.TypeSuppressionAdded
	for _, in := range []notify.Input{status, suppressed} {
		body, err := notify.Body("ntf_1", in, now)
		require.NoError(t, err)
		assert.NotContains(t, string(body), `"source"`, "%s of a webhook's event", in.Type)

		in.Event.Source = domain.SourceBackfill
		body, err = notify.Body("ntf_1", in, now)
		require.NoError(t, err)
		var env struct {
			Data map[string]any `json:"data"`
		}
		require.NoError(t, json.Unmarshal(body, &env))
		assert.Equal(t, "backfill", env.Data["source"], "%s of a backfilled event", in.Type)
	}
}

// Every notification about an event carries the sender's metadata and tags, in the data's
// declared key order; an event without them has bodies as before.
func TestEveryNotificationCarriesMetadataAndTags(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	ev := domain.Event{Provider: "postmark", EventID: "bounce:1", Type: "Bounce:HardBounce", Kind: domain.KindStatus,
		Status: domain.StatusBounced, BounceType: domain.BounceHard, MessageID: "msg_1", Recipient: "user@example.com",
		Metadata: map[string]string{"order_id": "A-17"}, Tags: []string{"receipts"}, Raw: json.RawMessage(`{}`)}
	inbound := ev
	inbound.Kind, inbound.Status, inbound.BounceType = domain.KindInbound, "", ""
	for _, in := range []notify.Input{
		{Type: domain.TypeStatusChanged, Event: ev, Applied: notify.Applied{From: domain.StatusDelivered, To: domain.StatusBounced, Version: 2}},
		{Type: domain.TypeSuppressionAdded, Event: ev},
		{Type: domain.TypeEmailReceived, Event: inbound},
	} {
		body, err := notify.Body("ntf_1", in, now)
		require.NoError(t, err)
		var env struct {
			Data struct {
				Metadata map[string]string `json:"metadata"`
				Tags     []string          `json:"tags"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(notify.Ordered(body), &env))
		assert.Equal(t, map[string]string{"order_id": "A-17"}, env.Data.Metadata, in.Type)
		assert.Equal(t, []string{"receipts"}, env.Data.Tags, in.Type)

		in.Event.Metadata, in.Event.Tags = nil, nil
		body, err = notify.Body("ntf_1", in, now)
		require.NoError(t, err)
		assert.NotContains(t, string(body), `"metadata"`, in.Type)
		assert.NotContains(t, string(body), `"tags"`, in.Type)
	}
}

// An open's notification says what the provider said of it; the IP only to a sink that allows it.
func TestEngagementBody(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	ev := domain.Event{Provider: "sendgrid", EventID: "e1", Type: "open", Kind: domain.KindOpened, MessageID: "msg_1",
		Recipient: "user@example.com", OccurredAt: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), Tags: []string{"welcome"},
		Engagement: &domain.Engagement{UserAgent: "GoogleImageProxy", IP: "66.102.6.12", Machine: true}}
	in := notify.Input{Type: domain.TypeMessageOpened, Event: ev}
	body, err := notify.Body("ntf_o", in, now)
	require.NoError(t, err)
	assert.Equal(t, `{"id":"ntf_o","type":"message.opened","created_at":"2026-11-29T10:00:00Z",`+
		`"data":{"provider":"sendgrid","message_id":"msg_1","recipient":"user@example.com","event_id":"e1","event_type":"open",`+
		`"occurred_at":"2026-11-29T09:00:00Z","user_agent":"GoogleImageProxy","machine_open":true,"tags":["welcome"]}}`,
		string(notify.Ordered(body)))

	in.EngagementIP = true
	body, err = notify.Body("ntf_o", in, now)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"ip":"66.102.6.12"`)

	in.Type, in.Event.Kind, in.Event.Type = domain.TypeMessageClicked, domain.KindClicked, "click"
	in.Event.Engagement = &domain.Engagement{URL: "https://example.com/x"}
	body, err = notify.Body("ntf_c", in, now)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"url":"https://example.com/x"`)
	assert.NotContains(t, string(body), `"ip"`)
}
