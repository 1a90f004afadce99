package hmac

import (
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// The provider conformance suite over the generic HMAC fixtures (a SendGrid-like sender, see
// docs/providers/hmac.md) with the Stripe-style mapping (timestamp and body signed), so that a
// stale timestamp is refused; the "documented" types are the endpoint's status_map.
func TestConformance(t *testing.T) {
	status := func(s domain.Status) provider.Class { return provider.Class{Kind: domain.KindStatus, Status: s} }
	providertest.Run(t, providertest.Conformance{
		Provider: Name,
		Adapter:  (*Adapter)(nil),
		Settings: provider.Settings{Secrets: []string{testKey}, Generic: timestamped()},
		Sign: func(_ testing.TB, body []byte, at time.Time) provider.Request {
			return provider.Request{Header: signStamped(testKey, at, body), Body: body, Now: time.Now()}
		},
		Tolerance: DefaultTolerance,
		Documented: map[string][]provider.Class{
			"processed": {status(domain.StatusAccepted)}, "deferred": {status(domain.StatusDeferred)},
			"delivered": {status(domain.StatusDelivered)}, "dropped": {status(domain.StatusFailed)},
			"bounce": {status(domain.StatusBounced)}, "spamreport": {status(domain.StatusComplained)},
			"open": {{Kind: domain.KindOpened}}, "click": {{Kind: domain.KindClicked}},
			"unsubscribe": {{Kind: domain.KindUnsubscribed}}, "inbound": {{Kind: domain.KindInbound}},
		},
		Fixtures: []string{"batch.json", "bounce.json", "delivered.json", "dropped.json", "inbound.json", "spamreport.json",
			"unknown_type.json", "unsubscribe.json"},
		NoMetadata: "a generic mapping has no metadata or tags fields",
	})
}
