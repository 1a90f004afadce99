package mailgun

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// The provider conformance suite over Mailgun's documented payloads (documentation.mailgun.com's
// webhook samples and mailgun-go's fixtures). Mailgun signs a timestamp and a token, not
// event-data: each request is signed anew with a fresh token, as Mailgun signs each attempt, and
// tampering is a changed token (a changed event-data is what the token binding refuses, in
// TestNonceIsTheTokenUntilTheSignatureExpires and the handler's tests).
// clicked_without_message is left out: a documented click kept as unknown (TestParseFixtures).
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Conformance{
		Provider: Name,
		Adapter:  (*Adapter)(nil),
		Settings: provider.Settings{Secrets: []string{testKey}},
		Sign: func(t testing.TB, body []byte, at time.Time) provider.Request {
			var top struct {
				Data json.RawMessage `json:"event-data"`
			}
			if err := json.Unmarshal(body, &top); err != nil {
				t.Fatal(err)
			}
			token := make([]byte, 25)
			_, _ = rand.Read(token)
			signed := providertest.MailgunBody(testKey, strconv.FormatInt(at.Unix(), 10), hex.EncodeToString(token), top.Data)
			return provider.Request{Body: signed, Now: time.Now()}
		},
		Tamper: func(r provider.Request) provider.Request {
			r.Body = bytes.Replace(r.Body, []byte(`"token":"`), []byte(`"token":"0`), 1)
			return r
		},
		Tolerance: DefaultTolerance,
		Documented: map[string][]provider.Class{
			"accepted":  {{Kind: domain.KindStatus, Status: domain.StatusAccepted}},
			"rejected":  {{Kind: domain.KindStatus, Status: domain.StatusFailed}},
			"delivered": {{Kind: domain.KindStatus, Status: domain.StatusDelivered}},
			"failed": {{Kind: domain.KindStatus, Status: domain.StatusDeferred}, {Kind: domain.KindStatus, Status: domain.StatusBounced},
				{Kind: domain.KindStatus, Status: domain.StatusFailed}},
			"opened":       {{Kind: domain.KindOpened}},
			"clicked":      {{Kind: domain.KindClicked}},
			"unsubscribed": {{Kind: domain.KindUnsubscribed}},
			"complained":   {{Kind: domain.KindStatus, Status: domain.StatusComplained}},
		},
		Fixtures: []string{"accepted.json", "clicked.json", "complained.json", "delivered.json", "failed_permanent.json",
			"failed_permanent_espblock.json", "failed_permanent_over_quota.json", "failed_suppress_bounce.json",
			"failed_temporary.json", "legacy_bounced.json", "legacy_dropped.json", "opened.json", "rejected.json", "stored.json",
			"subaccount_delivered.json", "unsubscribed.json"},
		Meta: fixtureMeta,
	})
}
