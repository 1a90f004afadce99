package activities_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// Process's result says why a bounce bounced: its type, category, SMTP and enhanced code and the
// server's diagnostic, whose addresses are masked as logs mask them (issue 44: "why did it
// bounce" was not answered in the UI). A delivery carries no bounce.
func TestProcessResultSaysWhyItBounced(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	a := &activities.Activities{Events: s.Events, Notifications: s.Notifications, SinkStates: s.Sinks}
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	env.RegisterActivity(a.Process)
	process := func(ev domain.Event) (activities.ProcessOutput, string) {
		t.Helper()
		_, err := storetest.Enqueue(t.Context(), s, ev)
		require.NoError(t, err)
		v, err := env.ExecuteActivity(a.Process, activities.ProcessInput{Provider: ev.Provider, EventID: ev.EventID})
		require.NoError(t, err)
		var out activities.ProcessOutput
		require.NoError(t, v.Get(&out))
		raw, err := json.Marshal(out)
		require.NoError(t, err)
		return out, string(raw)
	}
	at := time.Now().Add(-time.Hour)
	out, raw := process(domain.Event{Provider: "postscale", EventID: "evt_pb_bounce", Type: "email.bounced", Kind: domain.KindStatus,
		Status: domain.StatusBounced, BounceType: domain.BounceHard, MessageID: "msg_pb", Recipient: "jane.doe@example.com", OccurredAt: at,
		Bounce: &domain.Bounce{SMTPCode: 550, EnhancedCode: "5.1.1", Category: "unknown_user",
			Diagnostic: "550 5.1.1 <jane.doe@example.com>: Recipient address rejected: User unknown in virtual mailbox table"},
		Raw: json.RawMessage(`{}`)})
	require.Equal(t, &activities.BounceOutput{Type: domain.BounceHard, Category: "unknown_user", SMTPCode: 550, EnhancedCode: "5.1.1",
		Diagnostic: "550 5.1.1 <j***@example.com>: Recipient address rejected: User unknown in virtual mailbox table"}, out.Bounce)
	require.False(t, strings.Contains(raw, "jane"), "the result names the recipient: %s", raw)

	out, _ = process(domain.Event{Provider: "postscale", EventID: "evt_pb_delivered", Type: "email.delivered", Kind: domain.KindStatus,
		Status: domain.StatusDelivered, MessageID: "msg_pb2", Recipient: "jane.doe@example.com", OccurredAt: at, Raw: json.RawMessage(`{}`)})
	require.Nil(t, out.Bounce)
}
