package bounce_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/hmac"
	"github.com/mailhook/mailhook/internal/provider/mailgun"
	"github.com/mailhook/mailhook/internal/provider/postmark"
	"github.com/mailhook/mailhook/internal/provider/postscale"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/provider/sendgrid"
	"github.com/mailhook/mailhook/internal/provider/ses"
	"github.com/mailhook/mailhook/internal/provider/standardwebhooks"
	"github.com/mailhook/mailhook/internal/signature"
)

// outcome is what one bounced or failed event of a fixture must come out as: its category (""
// when the event carries no details) and its bounce type.
type outcome struct{ category, bounceType string }

const (
	hard = domain.BounceHard
	soft = domain.BounceSoft
)

// fixtureOutcomes lists every provider fixture that parses to a bounced or failed event,
// "<adapter dir>/<file>", one outcome per such event in order. A fixture missing here fails
// TestProviderFixtureCategories: a new bounce fixture must say what it classifies as.
var fixtureOutcomes = map[string][]outcome{
	// The documented "500 unknown recipient" example with type bounce, blocked, or none: the
	// 5xx reply names an unknown user, so hard whatever the type says.
	"sendgrid/bounce_hard.json":                      {{"unknown_user", hard}},
	"sendgrid/bounce_blocked.json":                   {{"unknown_user", hard}},
	"sendgrid/bounce_untyped.json":                   {{"unknown_user", hard}},
	"sendgrid/bounce_blocked_reputation.json":        {{"spam_block", soft}},
	"sendgrid/bounce_over_quota.json":                {{"mailbox_full", soft}},
	"sendgrid/bounce_classification_only.json":       {{"temporary_failure", soft}},
	"sendgrid/dropped.json":                          {{"undetermined", ""}},
	"mailgun/failed_permanent.json":                  {{"unknown_user", hard}},
	"mailgun/failed_permanent_over_quota.json":       {{"mailbox_full", soft}},
	"mailgun/failed_permanent_espblock.json":         {{"spam_block", soft}},
	"mailgun/failed_suppress_bounce.json":            {{"undetermined", ""}},
	"mailgun/rejected.json":                          {{"undetermined", ""}},
	"mailgun/legacy_bounced.json":                    {{"unknown_user", hard}},
	"mailgun/legacy_dropped.json":                    {{"undetermined", ""}},
	"postmark/bounce_hard.json":                      {{"unknown_user", hard}},
	"postmark/bounce_bad_email_address.json":         {{"unknown_user", hard}},
	"postmark/bounce_manually_deactivated.json":      {{"undetermined", hard}},
	"postmark/bounce_soft.json":                      {{"mailbox_full", soft}},
	"postmark/bounce_transient.json":                 {{"temporary_failure", soft}},
	"postmark/bounce_dns_error.json":                 {{"temporary_failure", soft}},
	"postmark/bounce_spam_notification.json":         {{"spam_block", soft}},
	"postmark/bounce_virus_notification.json":        {{"content_rejected", soft}},
	"postmark/bounce_dmarc_policy.json":              {{"auth_failure", soft}},
	"postmark/bounce_blocked.json":                   {{"policy_block", soft}},
	"postmark/bounce_unknown.json":                   {{"undetermined", ""}},
	"postmark/bounce_smtp_api_error.json":            {{"undetermined", ""}},
	"postmark/bounce_template_rendering_failed.json": {{"undetermined", ""}},
	"postmark/bounce_without_id.json":                {{"undetermined", hard}},
	"postmark/bounce_without_bounced_at.json":        {{"unknown_user", hard}},
	// SubscriptionChange with SuppressionReason HardBounce: hard, no details (the Bounce record
	// that preceded it carries them).
	"postmark/subscription_change_suppressed.json": {{"", hard}},
	"postscale/email_bounced_hard.json":            {{"unknown_user", hard}},
	"postscale/email_bounced_soft.json":            {{"temporary_failure", soft}},
	"postscale/email_bounced_untyped.json":         {{"", ""}},
	"ses/event_bounce.json":                        {{"unknown_user", hard}},
	"ses/event_reject.json":                        {{"content_rejected", ""}},
	"ses/event_rendering_failure.json":             {{"undetermined", ""}},
	"ses/notification_bounce_dsn.json":             {{"unknown_user", hard}},
	// Permanent/General without a DSN names no cause.
	"ses/notification_bounce_no_dsn.json":           {{"", hard}, {"", hard}},
	"ses/derived_bounce_transient.json":             {{"mailbox_full", soft}},
	"ses/derived_bounce_undetermined.json":          {{"", soft}},
	"ses/derived_bounce_too_large.json":             {{"too_large", soft}},
	"ses/derived_bounce_per_recipient.json":         {{"unknown_user", hard}, {"spam_block", hard}},
	"resend/resend_email_bounced_permanent.json":    {{"unknown_user", hard}},
	"resend/resend_email_bounced_transient.json":    {{"mailbox_full", soft}},
	"resend/resend_email_bounced_undetermined.json": {{"undetermined", ""}},
	// Resend's fixed sentence for Permanent/General ("…negative impact on your reputation…") is
	// advice, not a spam block; without bounce.type email.bounced is still permanent.
	"resend/resend_email_bounced_general.json": {{"undetermined", hard}},
	"resend/resend_email_bounced_untyped.json": {{"undetermined", hard}},
	"resend/resend_email_failed.json":          {{"undetermined", ""}},
	"resend/resend_email_suppressed.json":      {{"undetermined", ""}},
	// The generic providers have no bounce fields to read.
	"standard-webhooks/standard_message_bounced.json": {{"", ""}},
	"standard-webhooks/standard_message_failed.json":  {{"", ""}},
	"hmac/bounce.json":  {{"", ""}},
	"hmac/dropped.json": {{"", ""}},
}

// fixtureSource is one adapter and the fixtures it reads.
type fixtureSource struct {
	name  string // key prefix in fixtureOutcomes
	dir   string // package directory under internal/provider
	match string // fixture file pattern
	new   func() (provider.Adapter, error)
	// request wraps a fixture as the adapter receives it.
	request func(body []byte) provider.Request
}

func plain(body []byte) provider.Request { return provider.Request{Header: http.Header{}, Body: body} }

// Published test values (shared/reference/providers.md §4): the SendGrid verification key and
// the Standard Webhooks secret.
const (
	sendgridKey = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
	whsec       = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	topicARN    = "arn:aws:sns:us-east-1:123456789012:ses-events"
)

var sources = []fixtureSource{
	{"sendgrid", "sendgrid", "*.json", func() (provider.Adapter, error) {
		return sendgrid.New(provider.Settings{Secrets: []string{sendgridKey}})
	}, plain},
	{"mailgun", "mailgun", "*.json", func() (provider.Adapter, error) {
		return mailgun.New(provider.Settings{Secrets: []string{"key"}})
	}, plain},
	{"postmark", "postmark", "*.json", func() (provider.Adapter, error) {
		return postmark.New(provider.Settings{Secrets: []string{"user:password"}})
	}, plain},
	{"postscale", "postscale", "*.json", func() (provider.Adapter, error) {
		return postscale.New(provider.Settings{Secrets: []string{whsec}})
	}, plain},
	// The SES fixtures are the SES JSON an SNS envelope carries in Message.
	{"ses", "ses", "*.json", func() (provider.Adapter, error) {
		return ses.New(provider.Settings{TopicARNs: []string{topicARN}})
	}, func(body []byte) provider.Request {
		env := providertest.SNSEnvelope{Type: providertest.SNSNotification, MessageID: "sns-message-id", TopicARN: topicARN,
			Message: string(body), Timestamp: "2026-03-01T12:00:00.000Z"}
		return plain(env.Body())
	}},
	{"resend", "standardwebhooks", "resend_*.json", func() (provider.Adapter, error) {
		return standardwebhooks.NewResend(provider.Settings{Secrets: []string{whsec}})
	}, withID},
	// The mappings below are the ones the generic providers' own tests write their fixtures for.
	{"standard-webhooks", "standardwebhooks", "standard_*.json", func() (provider.Adapter, error) {
		return standardwebhooks.NewStandard(provider.Settings{Secrets: []string{whsec}, Generic: &provider.Generic{
			MessageIDField: "data.message_id", RecipientField: "data.recipients", OccurredAtField: "timestamp",
			StatusMap: map[string]string{"message.bounced": "bounced", "message.failed": "failed"},
		}})
	}, withID},
	{"hmac", "hmac", "*.json", func() (provider.Adapter, error) {
		return hmac.New(provider.Settings{Secrets: []string{"key"}, Generic: &provider.Generic{
			SignatureHeader: "X-Acme-Signature", SignaturePrefix: "sha256=", AllowUnsignedReplay: true,
			EventIDField: "id", TypeField: "event", MessageIDField: "message.id", RecipientField: "message.recipient",
			OccurredAtField: "created", StatusMap: map[string]string{"dropped": "failed", "bounce": "bounced"},
		}})
	}, plain},
}

func withID(body []byte) provider.Request {
	h := http.Header{}
	h.Set(standardwebhooks.HeaderSvixID, "msg_fixture")
	h.Set(signature.HeaderWebhookID, "msg_fixture")
	return provider.Request{Header: h, Body: body}
}

// TestProviderFixtureCategories parses every fixture of every adapter and checks the category
// and bounce type of each bounced or failed event against fixtureOutcomes.
func TestProviderFixtureCategories(t *testing.T) {
	seen := map[string]bool{}
	covered := map[string]bool{}
	for _, src := range sources {
		covered[src.dir] = true
		a, err := src.new()
		if err != nil {
			t.Fatalf("%s adapter: %v", src.name, err)
		}
		files, err := filepath.Glob(filepath.Join("..", "provider", src.dir, "testdata", src.match))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no fixtures (%v)", src.name, err)
		}
		for _, file := range files {
			key := src.name + "/" + filepath.Base(file)
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			events, err := a.Parse(src.request(body))
			if err != nil {
				t.Errorf("%s: Parse: %v", key, err)
				continue
			}
			var got []outcome
			for _, ev := range events {
				if ev.Status != domain.StatusBounced && ev.Status != domain.StatusFailed {
					continue
				}
				o := outcome{bounceType: ev.BounceType}
				if ev.Bounce != nil {
					o.category = ev.Bounce.Category
				}
				got = append(got, o)
			}
			want, listed := fixtureOutcomes[key]
			seen[key] = listed
			switch {
			case len(got) == 0 && listed:
				t.Errorf("%s: no bounced or failed event, but fixtureOutcomes lists it", key)
			case len(got) == 0:
			case !listed:
				t.Errorf("%s parses to bounced or failed events %s: add it to fixtureOutcomes", key, show(got))
			case show(got) != show(want):
				t.Errorf("%s: got %s, want %s", key, show(got), show(want))
			}
		}
	}
	for key := range fixtureOutcomes {
		if _, ok := seen[key]; !ok {
			t.Errorf("fixtureOutcomes lists %s, which is no fixture", key)
		}
	}
	// A new adapter's fixtures must be walked too.
	dirs, _ := filepath.Glob(filepath.Join("..", "provider", "*", "testdata"))
	var missing []string
	for _, d := range dirs {
		if name := filepath.Base(filepath.Dir(d)); !covered[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("adapters with fixtures this test does not read: %s (add them to sources)", strings.Join(missing, ", "))
	}
}

func show(outs []outcome) string {
	parts := make([]string, len(outs))
	for i, o := range outs {
		c := o.category
		if c == "" {
			c = "no details"
		}
		parts[i] = fmt.Sprintf("%s/%q", c, o.bounceType)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
