package standardwebhooks

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// signStandard signs body as Svix does: the webhook-id is the message's, the same on every
// retry (here derived from the body), the timestamp the attempt's.
func signStandard(secret string) func(testing.TB, []byte, time.Time) provider.Request {
	return func(t testing.TB, body []byte, at time.Time) provider.Request {
		sum := sha256.Sum256(body)
		h, err := providertest.StandardHeaders(secret, "msg_"+hex.EncodeToString(sum[:12]), at, body)
		if err != nil {
			t.Fatal(err)
		}
		return provider.Request{Header: h, Body: body, Now: time.Now()}
	}
}

// The provider conformance suite over Resend's documented payloads (resend.com/docs's event
// pages and its SDKs' fixtures, testdata/resend_*).
func TestConformanceResend(t *testing.T) {
	status := func(s domain.Status) provider.Class { return provider.Class{Kind: domain.KindStatus, Status: s} }
	providertest.Run(t, providertest.Conformance{
		Provider:  NameResend,
		Adapter:   (*Adapter)(nil),
		Settings:  provider.Settings{Secrets: []string{vecSecret}},
		Sign:      signStandard(vecSecret),
		Tolerance: DefaultTolerance,
		Documented: map[string][]provider.Class{
			"email.sent":              {status(domain.StatusAccepted)},
			"email.delivered":         {status(domain.StatusDelivered)},
			"email.delivery_delayed":  {status(domain.StatusDeferred)},
			"email.delivered_delayed": {status(domain.StatusDeferred)},
			"email.bounced":           {status(domain.StatusBounced)},
			"email.complained":        {status(domain.StatusComplained)},
			"email.failed":            {status(domain.StatusFailed)},
			"email.suppressed":        {status(domain.StatusFailed)},
			"email.opened":            {{Kind: domain.KindOpened}},
			"email.clicked":           {{Kind: domain.KindClicked}},
			"email.received":          {{Kind: domain.KindInbound}},
			"email.scheduled":         {{Kind: domain.KindUnknown}},
		},
		Fixtures: []string{"resend_contact_created.json", "resend_domain_updated.json", "resend_email_bounced_general.json",
			"resend_email_bounced_permanent.json", "resend_email_bounced_transient.json", "resend_email_bounced_undetermined.json",
			"resend_email_bounced_untyped.json", "resend_email_clicked.json", "resend_email_complained.json",
			"resend_email_delivered.json", "resend_email_delivered_delayed_typo.json", "resend_email_delivery_delayed.json",
			"resend_email_failed.json", "resend_email_opened.json", "resend_email_received.json", "resend_email_scheduled.json",
			"resend_email_sent.json", "resend_email_suppressed.json"},
		Meta: fixtureMeta,
	})
}

// The suite over the Standard Webhooks fixtures (the specification's payload shape) with the
// mapping testGeneric gives them: the "documented" types are the endpoint's status_map.
func TestConformanceStandard(t *testing.T) {
	status := func(s domain.Status) provider.Class { return provider.Class{Kind: domain.KindStatus, Status: s} }
	providertest.Run(t, providertest.Conformance{
		Provider:  NameStandard,
		Adapter:   (*Adapter)(nil),
		Settings:  provider.Settings{Secrets: []string{vecSecret}, Generic: testGeneric()},
		Sign:      signStandard(vecSecret),
		Tolerance: DefaultTolerance,
		Documented: map[string][]provider.Class{
			"message.queued": {status(domain.StatusAccepted)}, "message.delivered": {status(domain.StatusDelivered)},
			"message.deferred": {status(domain.StatusDeferred)}, "message.bounced": {status(domain.StatusBounced)},
			"message.failed": {status(domain.StatusFailed)}, "message.complained": {status(domain.StatusComplained)},
			"message.opened": {{Kind: domain.KindOpened}}, "message.clicked": {{Kind: domain.KindClicked}},
			"recipient.unsubscribed": {{Kind: domain.KindUnsubscribed}}, "inbound.received": {{Kind: domain.KindInbound}},
		},
		Fixtures: []string{"standard_inbound_received.json", "standard_message_bounced.json",
			"standard_message_clicked_unix_string.json", "standard_message_complained.json", "standard_message_deferred.json",
			"standard_message_delivered.json", "standard_message_failed.json", "standard_message_opened_unix.json",
			"standard_message_queued.json", "standard_recipient_unsubscribed.json", "standard_user_created.json"},
		NoMetadata: "a generic mapping has no metadata or tags fields",
	})
}
