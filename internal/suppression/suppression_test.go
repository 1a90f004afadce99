package suppression_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/suppression"
)

func status(st domain.Status, bounce, to string) domain.Event {
	return domain.Event{Kind: domain.KindStatus, Status: st, BounceType: bounce, Recipient: to}
}

func TestOf(t *testing.T) {
	unsub := domain.Event{Kind: domain.KindUnsubscribed}
	raw, _ := json.Marshal(domain.Correction{Status: domain.StatusComplained, Reason: "x", Actor: "ops"})
	correction := domain.Event{Kind: domain.KindCorrection, Status: domain.StatusComplained, Recipient: "to@example.com", Raw: raw}
	tests := []struct {
		name       string
		ev         domain.Event
		recipient  string
		wantAddr   string
		wantReason string
	}{
		{"hard bounce, lower-cased", status(domain.StatusBounced, domain.BounceHard, " User@Example.COM "), "", "user@example.com", domain.ReasonHardBounce},
		{"complaint", status(domain.StatusComplained, "", "to@example.com"), "", "to@example.com", domain.ReasonComplaint},
		{"unsubscribe without a recipient uses the message's", unsub, "Msg@Example.com", "msg@example.com", domain.ReasonUnsubscribe},
		{"the event's recipient wins over the message's", status(domain.StatusBounced, domain.BounceHard, "a@example.com"), "b@example.com", "a@example.com", domain.ReasonHardBounce},
		{"soft bounce", status(domain.StatusBounced, domain.BounceSoft, "to@example.com"), "", "", ""},
		{"bounce without a type", status(domain.StatusBounced, "", "to@example.com"), "", "", ""},
		{"failed", status(domain.StatusFailed, "", "to@example.com"), "", "", ""},
		{"no address anywhere", unsub, "", "", ""},
		{"a correction never suppresses", correction, "to@example.com", "", ""},
	}
	for _, tc := range tests {
		addr, reason, scope, ok := suppression.Of(tc.ev, tc.recipient, nil)
		assert.Equal(t, tc.wantAddr != "", ok, tc.name)
		assert.Equal(t, tc.wantAddr, addr, tc.name)
		assert.Equal(t, tc.wantReason, reason, tc.name)
		if ok {
			assert.Equal(t, suppression.GlobalScope, scope, "%s: without scopes everything is global", tc.name)
		}
	}
}

func TestOfScopes(t *testing.T) {
	scopes := map[string]string{"broadcast": "marketing", "digest": "marketing", "outbound": "transactional", "legacy": "global"}
	const to = "u@example.com"
	streamed := func(ev domain.Event, stream string) domain.Event {
		ev.Stream = stream
		return ev
	}
	unsub := domain.Event{Kind: domain.KindUnsubscribed, Recipient: to}
	tests := []struct {
		name      string
		ev        domain.Event
		wantScope string
	}{
		{"unsubscribe from a mapped stream", streamed(unsub, "broadcast"), "marketing"},
		{"complaint from a mapped stream", streamed(status(domain.StatusComplained, "", to), "outbound"), "transactional"},
		{"hard bounce from a mapped stream is global", streamed(status(domain.StatusBounced, domain.BounceHard, to), "broadcast"), suppression.GlobalScope},
		{"unsubscribe from an unmapped stream", streamed(unsub, "other"), suppression.GlobalScope},
		{"unsubscribe without a stream", unsub, suppression.GlobalScope},
		{"a stream mapped to global", streamed(unsub, "legacy"), suppression.GlobalScope},
		{"stream names are exact", streamed(unsub, "Broadcast"), suppression.GlobalScope},
	}
	for _, tc := range tests {
		addr, _, scope, ok := suppression.Of(tc.ev, "", scopes)
		require.True(t, ok, tc.name)
		assert.Equal(t, to, addr, tc.name)
		assert.Equal(t, tc.wantScope, scope, tc.name)
	}
	_, _, _, ok := suppression.Of(streamed(status(domain.StatusBounced, domain.BounceSoft, to), "broadcast"), "", scopes)
	assert.False(t, ok, "a soft bounce suppresses nothing by itself, scoped or not")
}

func TestAddedNamesTheSoftBounceThreshold(t *testing.T) {
	soft := status(domain.StatusBounced, domain.BounceSoft, "")
	address, reason, scope, ok := suppression.Added(soft, "Busy@Example.com", map[string]string{"": "marketing"})
	require.True(t, ok)
	assert.Equal(t, []string{"busy@example.com", domain.ReasonSoftBounceThreshold, suppression.GlobalScope}, []string{address, reason, scope})

	_, _, _, ok = suppression.Added(status(domain.StatusDelivered, "", "to@example.com"), "", nil)
	assert.False(t, ok, "a delivery cannot have suppressed anything")
	_, ok = suppression.SoftBounceOf(soft, "")
	assert.False(t, ok, "a soft bounce without an address counts for nobody")
}

func TestSoftBounceReached(t *testing.T) {
	p := suppression.SoftBounce{Count: 3, Within: 1}
	assert.False(t, p.Reached(2))
	assert.True(t, p.Reached(3))
	assert.True(t, p.Reached(4))
	assert.False(t, suppression.SoftBounce{Count: 3}.Reached(5), "no window: off")
	assert.False(t, suppression.SoftBounce{}.On())
}
