package activities_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
)

// These results are recorded in histories (activity results, local activity markers, workflow
// results) and shown in the Temporal UI: their JSON must stay byte for byte what it was, however
// the Go types are declared.
func TestHistoryJSONIsPinned(t *testing.T) {
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"result moved", domain.Result{
			Transition:    domain.Transition{Outcome: domain.OutcomeMoved, From: domain.StatusAccepted, To: domain.StatusBounced, Version: 3, Suppressed: true},
			Notifications: []domain.NotificationResult{{Sink: "app", Type: domain.TypeStatusChanged, ID: "ntf_1", Status: domain.NotificationSent}}},
			`{"outcome":"moved","from":"accepted","to":"bounced","version":3,"suppressed":true,"notifications":[{"sink":"app","type":"message.status_changed","id":"ntf_1","status":"sent"}]}`},
		{"result duplicate", domain.Result{Transition: domain.Transition{Outcome: domain.OutcomeDuplicate}}, `{"outcome":"duplicate"}`},
		{"result stale", domain.Result{Transition: domain.Transition{Outcome: domain.OutcomeStale, From: domain.StatusDelivered, To: domain.StatusDelivered, Version: 2}},
			`{"outcome":"stale","from":"delivered","to":"delivered","version":2}`},

		{"process duplicate", activities.ProcessOutput{Duplicate: true}, `{"duplicate":true}`},
		{"process inbound", activities.ProcessOutput{Kind: domain.KindInbound, Processed: true}, `{"kind":"inbound","processed":true}`},
		{"process applied", activities.ProcessOutput{Kind: domain.KindStatus, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeMoved, From: domain.StatusAccepted, To: domain.StatusBounced, Version: 3, Suppressed: true}},
			`{"kind":"status","applied":true,"outcome":"moved","from":"accepted","to":"bounced","version":3,"suppressed":true}`},
		{"process bounce", activities.ProcessOutput{Kind: domain.KindStatus, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeMoved, From: domain.StatusDelivered, To: domain.StatusBounced, Version: 2},
			Bounce: &activities.BounceOutput{Type: "hard", Category: "unknown_user", SMTPCode: 550, EnhancedCode: "5.1.1", Diagnostic: "550 5.1.1 <j***@example.com>: no such user"}},
			`{"kind":"status","applied":true,"outcome":"moved","from":"delivered","to":"bounced","version":2,"bounce":{"type":"hard","category":"unknown_user","smtp_code":550,"enhanced_code":"5.1.1","diagnostic":"550 5.1.1 \u003cj***@example.com\u003e: no such user"}}`},
		{"process counted", activities.ProcessOutput{Kind: domain.KindOpened, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeCounted}, Processed: true},
			`{"kind":"opened","applied":true,"outcome":"counted","processed":true}`},

		{"apply moved", domain.ApplyResult{Outcome: domain.OutcomeMoved, From: domain.StatusAccepted, To: domain.StatusBounced, BounceType: "hard",
			Recipient: "a@example.com", Version: 3, Suppressed: true},
			`{"outcome":"moved","from":"accepted","to":"bounced","bounce_type":"hard","recipient":"a@example.com","version":3,"suppressed":true}`},
		{"apply counted", domain.ApplyResult{Outcome: domain.OutcomeCounted}, `{"outcome":"counted","from":"","to":"","version":0}`},
	} {
		got, err := json.Marshal(c.v)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, string(got), c.name)
	}
}
