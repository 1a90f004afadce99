package sendgrid

import (
	"net/http"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// The provider conformance suite over SendGrid's documented payloads (testdata: the Event
// Webhook reference's examples, category "cat facts", and sendgrid-go's eventwebhook test batch;
// docs/TESTING.md, "Provider fixtures").
// bounce_async_no_message_id is left out: a documented bounce kept as unknown
// (TestParseFixtures).
func TestConformance(t *testing.T) {
	priv := genKey(t)
	providertest.Run(t, providertest.Conformance{
		Provider: Name,
		Adapter:  (*Adapter)(nil),
		Settings: provider.Settings{Secrets: []string{providertest.SendGridPublicKey(&priv.PublicKey)}},
		Sign: func(_ testing.TB, body []byte, at time.Time) provider.Request {
			req, _ := http.NewRequest(http.MethodPost, "/", nil)
			req.Header.Set("Content-Type", "application/json")
			providertest.SignSendGrid(req, priv, body, at)
			return provider.Request{Header: req.Header, Body: body, Now: time.Now()}
		},
		Tolerance: DefaultTolerance,
		Documented: map[string][]provider.Class{
			"processed":         {{Kind: domain.KindStatus, Status: domain.StatusAccepted}},
			"deferred":          {{Kind: domain.KindStatus, Status: domain.StatusDeferred}},
			"delivered":         {{Kind: domain.KindStatus, Status: domain.StatusDelivered}},
			"bounce":            {{Kind: domain.KindStatus, Status: domain.StatusBounced}},
			"dropped":           {{Kind: domain.KindStatus, Status: domain.StatusFailed}},
			"spamreport":        {{Kind: domain.KindStatus, Status: domain.StatusComplained}},
			"open":              {{Kind: domain.KindOpened}},
			"click":             {{Kind: domain.KindClicked}},
			"unsubscribe":       {{Kind: domain.KindUnsubscribed}},
			"group_unsubscribe": {{Kind: domain.KindUnsubscribed}},
		},
		Fixtures: []string{"account_status_change.json", "batch_modern.json", "bounce_blocked.json", "bounce_blocked_reputation.json",
			"bounce_classification_only.json", "bounce_hard.json", "bounce_over_quota.json", "bounce_untyped.json", "click.json",
			"deferred.json", "delivered.json", "dropped.json", "group_resubscribe.json", "group_unsubscribe.json", "open.json",
			"processed.json", "spamreport.json", "unsubscribe.json"},
		Meta: fixtureMeta,
	})
}
