package ses

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// The provider conformance suite over Amazon SES's documented payloads (the SES developer
// guide's notification and event-publishing examples: testdata/README.md), each posted in an SNS
// Notification signed by the fake SNS's key. SES signs the envelope's Timestamp, which mailhook
// checks only when tolerance is set (SNS retries keep the first Timestamp): the suite sets 2 h.
// derived_* fixtures are left out: they are AWS's examples edited to test one rule each
// (TestFixtures).
func TestConformance(t *testing.T) {
	f := newFakeSNS(t)
	s := f.settings()
	s.Tolerance = 2 * time.Hour
	status := func(st domain.Status) provider.Class { return provider.Class{Kind: domain.KindStatus, Status: st} }
	providertest.Run(t, providertest.Conformance{
		Provider:       Name,
		Adapter:        (*Adapter)(nil),
		WithoutSecrets: true,
		Settings:       s,
		Sign: func(t testing.TB, body []byte, at time.Time) provider.Request {
			env := f.notification(string(body))
			env.Timestamp = stamp(at)
			return request(sign(t, env, f.key, SignatureVersion2))
		},
		Tamper: func(r provider.Request) provider.Request {
			var env Envelope
			if err := json.Unmarshal(r.Body, &env); err != nil {
				panic(err)
			}
			env.Message += " "
			r.Body = env.Body()
			return r
		},
		Tolerance: s.Tolerance,
		StaleErr:  ErrTimestamp,
		Documented: map[string][]provider.Class{
			"Send": {status(domain.StatusAccepted)}, "Delivery": {status(domain.StatusDelivered)},
			"DeliveryDelay": {status(domain.StatusDeferred)}, "Bounce": {status(domain.StatusBounced)},
			"Complaint": {status(domain.StatusComplained)}, "Reject": {status(domain.StatusFailed)},
			"Rendering Failure": {status(domain.StatusFailed)}, "Open": {{Kind: domain.KindOpened}},
			"Click": {{Kind: domain.KindClicked}}, "Subscription": {{Kind: domain.KindUnsubscribed}},
			"Received": {{Kind: domain.KindInbound}},
		},
		Fixtures: []string{"event_bounce.json", "event_click.json", "event_complaint.json", "event_delivery.json",
			"event_delivery_delay.json", "event_open.json", "event_reject.json", "event_rendering_failure.json",
			"event_send.json", "event_subscription.json", "notification_bounce_dsn.json", "notification_bounce_no_dsn.json",
			"notification_complaint.json", "notification_delivery.json", "notification_subscription_succeeded.json",
			"received_s3_action.json", "received_sns_action.json"},
		Meta: sesFixtureMeta,
	})
}

// sesFixtureMeta: AWS's event-publishing examples carry two custom mail.tags (ses: tags are
// SES's own and not metadata); the notification examples none.
var sesFixtureMeta = func() map[string]providertest.Meta {
	tags := func(v1, v2 string) providertest.Meta {
		return providertest.Meta{Metadata: map[string]string{"myCustomTag1": v1, "myCustomTag2": v2}}
	}
	m := map[string]providertest.Meta{}
	for _, f := range []string{"event_click", "event_open", "event_subscription"} {
		m[f+"/0"] = tags("myCustomValue1", "myCustomValue2")
	}
	for _, f := range []string{"event_delivery", "event_reject", "event_send"} {
		m[f+"/0"] = tags("myCustomTagValue1", "myCustomTagValue2")
	}
	return m
}()
