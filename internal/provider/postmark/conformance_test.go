package postmark

import (
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// The provider conformance suite over Postmark's documented payloads (postmarkapp.com's webhook
// pages and the Bounce API's type list). Postmark signs nothing: its proof is the Basic
// credentials of the webhook URL, so tampering is a wrong password, and there is no timestamp.
// bounce_without_id is left out: refused as a bad request (TestParseBadRequest).
func TestConformance(t *testing.T) {
	status := func(s domain.Status) provider.Class { return provider.Class{Kind: domain.KindStatus, Status: s} }
	providertest.Run(t, providertest.Conformance{
		Provider: Name,
		Adapter:  (*Adapter)(nil),
		Settings: provider.Settings{Secrets: []string{testCred}},
		Sign: func(_ testing.TB, body []byte, _ time.Time) provider.Request {
			return provider.Request{Header: providertest.PostmarkHeader("postmark-hook", "s3cret-pa55"), Body: body, Now: time.Now()}
		},
		Tamper: func(r provider.Request) provider.Request {
			r.Header = providertest.PostmarkHeader("postmark-hook", "s3cret-pa56")
			return r
		},
		Documented: map[string][]provider.Class{
			"Delivery": {status(domain.StatusDelivered)},
			// Each bounce Type as the page's table says (the event's Type is "Bounce:<Type>").
			"Bounce:HardBounce":              {status(domain.StatusBounced)},
			"Bounce:BadEmailAddress":         {status(domain.StatusBounced)},
			"Bounce:ManuallyDeactivated":     {status(domain.StatusBounced)},
			"Bounce:SoftBounce":              {status(domain.StatusBounced)},
			"Bounce:Transient":               {status(domain.StatusBounced)},
			"Bounce:DnsError":                {status(domain.StatusBounced)},
			"Bounce:SpamNotification":        {status(domain.StatusBounced)},
			"Bounce:VirusNotification":       {status(domain.StatusBounced)},
			"Bounce:DMARCPolicy":             {status(domain.StatusBounced)},
			"Bounce:Blocked":                 {status(domain.StatusBounced)},
			"Bounce:Unknown":                 {status(domain.StatusBounced)},
			"Bounce:SMTPApiError":            {status(domain.StatusFailed)},
			"Bounce:TemplateRenderingFailed": {status(domain.StatusFailed)},
			"Bounce:SpamComplaint":           {status(domain.StatusComplained)},
			"Bounce:Unsubscribe":             {{Kind: domain.KindUnsubscribed}},
			"Bounce:AutoResponder":           {{Kind: domain.KindUnknown}},
			"Bounce:AddressChange":           {{Kind: domain.KindUnknown}},
			"Bounce:Subscribe":               {{Kind: domain.KindUnknown}},
			"Bounce:OpenRelayTest":           {{Kind: domain.KindUnknown}},
			"Bounce:ChallengeVerification":   {{Kind: domain.KindUnknown}},
			"Bounce:Unconfirmed":             {{Kind: domain.KindUnknown}},
			"Bounce:InboundError":            {{Kind: domain.KindUnknown}},
			"SpamComplaint":                  {status(domain.StatusComplained)},
			"Open":                           {{Kind: domain.KindOpened}},
			"Click":                          {{Kind: domain.KindClicked}},
			"SubscriptionChange": {status(domain.StatusBounced), status(domain.StatusComplained), {Kind: domain.KindUnsubscribed},
				{Kind: domain.KindUnknown}},
			InboundType: {{Kind: domain.KindInbound}},
		},
		Fixtures: []string{"bounce_address_change.json", "bounce_auto_responder.json", "bounce_bad_email_address.json",
			"bounce_blocked.json", "bounce_challenge_verification.json", "bounce_dmarc_policy.json", "bounce_dns_error.json",
			"bounce_future_type.json", "bounce_hard.json", "bounce_inbound_error.json", "bounce_manually_deactivated.json",
			"bounce_open_relay_test.json", "bounce_smtp_api_error.json", "bounce_soft.json", "bounce_spam_complaint_type.json",
			"bounce_spam_notification.json", "bounce_subscribe.json", "bounce_template_rendering_failed.json",
			"bounce_transient.json", "bounce_unconfirmed.json", "bounce_unknown.json", "bounce_unsubscribe.json",
			"bounce_virus_notification.json", "bounce_without_bounced_at.json", "click.json", "delivery.json", "inbound.json",
			"open.json", "spam_complaint.json", "subscription_change_manual_no_message.json",
			"subscription_change_reactivated.json", "subscription_change_spam_complaint.json",
			"subscription_change_suppressed.json", "subscription_change_unsubscribed.json", "unknown_record_type.json"},
		Meta: fixtureMeta,
	})
}
