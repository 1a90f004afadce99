package domain_test

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
)

func TestNotificationIDIsStable(t *testing.T) {
	id := domain.NotificationID("resend", "evt_1", "slack", "status.moved")
	assert.Equal(t, id, domain.NotificationID("resend", "evt_1", "slack", "status.moved"))
	assert.Regexp(t, regexp.MustCompile(`^ntf_[0-9a-f]{32}$`), id)
	// Pinned (computed with sha256sum): the id is an Idempotency-Key that receivers store, so
	// it must not change between releases.
	assert.Equal(t, "ntf_596c7dd4e551acc501d92b8947509cf9", id)

	assert.NotEqual(t, id, domain.NotificationID("resend", "evt_1", "webhook", "status.moved"))
	assert.NotEqual(t, id, domain.NotificationID("resend", "evt_2", "slack", "status.moved"))
	// Without separators these two tuples would hash the same input.
	assert.NotEqual(t, domain.NotificationID("ab", "c", "s", "t"), domain.NotificationID("a", "bc", "s", "t"))
}

func TestKindAppliesToMessage(t *testing.T) {
	for k, want := range map[domain.Kind]bool{
		domain.KindStatus: true, domain.KindCorrection: true, domain.KindOpened: true,
		domain.KindClicked: true, domain.KindUnsubscribed: true,
		domain.KindInbound: false, domain.KindUnknown: false, "": false,
	} {
		assert.Equal(t, want, k.AppliesToMessage(), "kind %q", k)
	}
}

// Routing comes from one question to the config (which sinks want type T), in config order.
func TestRouteAsksForEachEventNotificationType(t *testing.T) {
	sinks := map[string][]string{
		domain.TypeStatusChanged:    {"app", "audit"},
		domain.TypeSuppressionAdded: {"ops"},
		domain.TypeReportDaily:      {"ops"}, // not an event's notification: not routed
	}
	r := domain.Route(func(typ string) []string { return sinks[typ] })
	assert.Equal(t, domain.Routing{StatusSinks: []string{"app", "audit"}, SuppressionSinks: []string{"ops"}}, r)
}

func TestNotificationsFollowTheOutcome(t *testing.T) {
	r := domain.Routing{StatusSinks: []string{"app"}, InboundSinks: []string{"inbox"}, SuppressionSinks: []string{"ops"}}
	for _, c := range []struct {
		name       string
		kind       domain.Kind
		outcome    domain.Outcome
		suppressed bool
		want       []domain.Notification
	}{
		{"moved", domain.KindStatus, domain.OutcomeMoved, false, []domain.Notification{{domain.TypeStatusChanged, "app"}}},
		{"moved and suppressed", domain.KindStatus, domain.OutcomeMoved, true,
			[]domain.Notification{{domain.TypeStatusChanged, "app"}, {domain.TypeSuppressionAdded, "ops"}}},
		{"stale but suppressed (soft-bounce threshold)", domain.KindStatus, domain.OutcomeStale, true,
			[]domain.Notification{{domain.TypeSuppressionAdded, "ops"}}},
		{"stale", domain.KindStatus, domain.OutcomeStale, false, nil},
		{"counted", domain.KindOpened, domain.OutcomeCounted, false, nil},
		{"inbound", domain.KindInbound, domain.OutcomeInbound, false, []domain.Notification{{domain.TypeEmailReceived, "inbox"}}},
		{"unknown type", domain.KindUnknown, domain.OutcomeUnknownType, false, nil},
	} {
		assert.Equal(t, c.want, domain.Notifications(r, c.kind, c.outcome, c.suppressed), c.name)
	}
	// Engagement goes only to the sinks that list it.
	r.OpenedSinks, r.ClickedSinks, r.UnsubscribedSinks = []string{"analytics"}, []string{"analytics", "ads"}, []string{"crm"}
	for _, c := range []struct {
		name       string
		kind       domain.Kind
		outcome    domain.Outcome
		suppressed bool
		want       []domain.Notification
	}{
		{"opened", domain.KindOpened, domain.OutcomeCounted, false, []domain.Notification{{domain.TypeMessageOpened, "analytics"}}},
		{"clicked", domain.KindClicked, domain.OutcomeCounted, false,
			[]domain.Notification{{domain.TypeMessageClicked, "analytics"}, {domain.TypeMessageClicked, "ads"}}},
		{"unsubscribed", domain.KindUnsubscribed, domain.OutcomeFlagged, true,
			[]domain.Notification{{domain.TypeSuppressionAdded, "ops"}, {domain.TypeMessageUnsubscribed, "crm"}}},
		{"a duplicate open", domain.KindOpened, domain.OutcomeDuplicate, false, nil},
	} {
		assert.Equal(t, c.want, domain.Notifications(r, c.kind, c.outcome, c.suppressed), c.name)
	}
}

// EventRef's JSON is in every ProcessEvent history: a renamed field would break the replay of
// runs started before the change.
func TestEventRefJSONIsStable(t *testing.T) {
	ev := domain.Event{Provider: "postscale", EventID: "evt_1", Type: "email.bounced", Kind: domain.KindStatus,
		Status: domain.StatusBounced, MessageID: "msg_1", Recipient: "a@example.com", Raw: json.RawMessage(`{}`)}
	ref := domain.RefOf(ev, domain.Routing{StatusSinks: []string{"app"}})
	ref.Replay, ref.Renotify = 2, true
	b, err := json.Marshal(ref)
	require.NoError(t, err)
	assert.JSONEq(t, `{"provider":"postscale","event_id":"evt_1","type":"email.bounced","kind":"status",
		"message_id":"msg_1","status_sinks":["app"],"replay":2,"renotify":true}`, string(b))
	assert.Equal(t, "postscale:evt_1", ref.Key())
	assert.Equal(t, "evt_1:replay:2", ref.NotificationEventID())
	ref.Renotify = false
	assert.Equal(t, "evt_1", ref.NotificationEventID(), "a replay without renotify keeps the first notification ids")
}

func TestRedriveResultCountsOutcomes(t *testing.T) {
	var r domain.RedriveResult
	for _, o := range []string{domain.RedriveStarted, domain.RedriveStarted, domain.RedriveRunning, domain.RedriveSkipped} {
		r.Add(domain.RedriveOutcome{Outcome: o})
	}
	r.Add(domain.RedriveOutcome{Outcome: domain.RedriveFailed, Error: "temporal unavailable"})
	assert.Equal(t, []int{5, 2, 1, 1, 1}, []int{r.Considered, r.Started, r.Running, r.Skipped, r.Failed})
	assert.Equal(t, "temporal unavailable", r.FirstError())
}

// Source is added to the workflow input's JSON only when set: a webhook's event marshals as
// before, so recorded histories replay unchanged.
func TestEventSourceIsOmittedForWebhooks(t *testing.T) {
	b, err := json.Marshal(domain.Event{Provider: "mailgun", EventID: "e1"})
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"source"`, "a webhook's event")
	b, err = json.Marshal(domain.Event{Provider: "mailgun", EventID: "e1", Source: domain.SourceBackfill})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"source":"backfill"`, "a backfilled event")
}
