package postscale

import (
	"net/http"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// The provider conformance suite over Postscale's documented payloads (postscale.io/docs/webhooks
// and inbound-webhooks; /work/shared/reference/providers.md §1.7). email_delivered_metadata is
// email_delivered with data.metadata and data.tags: Postscale documents a send's metadata but
// shows no webhook carrying it.
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Conformance{
		Provider: Name,
		Adapter:  (*Adapter)(nil),
		Settings: provider.Settings{Secrets: []string{testSecret}},
		Sign: func(_ testing.TB, body []byte, at time.Time) provider.Request {
			h := http.Header{}
			h.Set(providertest.PostscaleSignatureHeader, providertest.PostscaleSignature(testSecret, at, body))
			return provider.Request{Header: h, Body: body, Now: time.Now()}
		},
		Tolerance: DefaultTolerance,
		Documented: map[string][]provider.Class{
			"email.sent":         {{Kind: domain.KindStatus, Status: domain.StatusAccepted}},
			"email.delivered":    {{Kind: domain.KindStatus, Status: domain.StatusDelivered}},
			"email.deferred":     {{Kind: domain.KindStatus, Status: domain.StatusDeferred}},
			"email.bounced":      {{Kind: domain.KindStatus, Status: domain.StatusBounced}},
			"email.complained":   {{Kind: domain.KindStatus, Status: domain.StatusComplained}},
			"email.opened":       {{Kind: domain.KindOpened}},
			"email.clicked":      {{Kind: domain.KindClicked}},
			"email.unsubscribed": {{Kind: domain.KindUnsubscribed}},
			"email.received":     {{Kind: domain.KindInbound}},
			"inbound.received":   {{Kind: domain.KindInbound}},
		},
		Fixtures: []string{"email_bounced_hard.json", "email_bounced_soft.json", "email_bounced_untyped.json", "email_clicked.json",
			"email_complained.json", "email_deferred.json", "email_delivered.json", "email_delivered_flat.json",
			"email_delivered_metadata.json", "email_opened.json", "email_received_flat.json", "email_sent.json",
			"email_unsubscribed.json", "inbound_received_envelope.json", "inbound_received_flat_received_at.json",
			"unknown_alias_created.json", "unknown_with_email.json"},
		Meta: map[string]providertest.Meta{
			"email_delivered_metadata": {Metadata: map[string]string{"order_id": "A-17", "attempt": "2"}, Tags: []string{"receipts"}},
		},
	})
}
