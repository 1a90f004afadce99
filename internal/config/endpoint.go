package config

import "time"

// ProviderSettings are an endpoint's settings for its provider's adapter, inline in the
// endpoint's block. The wiring hands them to the adapter as provider.Settings
// (serve.ProviderSettings); each provider uses the fields its scheme needs and refuses the
// settings it cannot use, which start-up reports under the endpoint's key.
type ProviderSettings struct {
	// Secrets are all currently valid credentials, several during a rotation: HMAC signing
	// secrets, verification public keys (SendGrid), or "user:password" pairs (Postmark).
	Secrets []string `yaml:"secrets"`
	// Tolerance is how far a signed timestamp may be from now, in either direction. Zero means
	// the provider's default; providers that do not sign a timestamp refuse it.
	Tolerance time.Duration `yaml:"tolerance"`
	// AllowCIDRs, when set, restricts the source addresses requests may come from.
	AllowCIDRs []string `yaml:"allow_cidrs"`
	// TopicARNs is the allow-list of SNS topics (Amazon SES through SNS).
	TopicARNs []string `yaml:"topic_arns"`
	// CertHostPattern is the regular expression an SNS SigningCertURL / SubscribeURL host must
	// match; empty means the provider's default.
	CertHostPattern string `yaml:"cert_host_pattern"`
	// Generic describes a provider mailhook has no adapter for (providers "hmac" and
	// "standard-webhooks").
	Generic *Generic `yaml:"generic"`
}

// Generic maps a provider's JSON onto events and says how it signs. Field paths are dotted
// (data.email_id); a body that is a JSON array is a batch of events. Its fields are
// provider.Generic's, in the same order (the wiring converts one into the other).
type Generic struct {
	// Signature.
	SignatureHeader string `yaml:"signature_header"` // e.g. X-Signature
	SignaturePrefix string `yaml:"signature_prefix"` // stripped before decoding, e.g. "sha256="
	Algorithm       string `yaml:"algorithm"`        // sha256 (default) or sha512
	Encoding        string `yaml:"encoding"`         // hex (default) or base64
	// Signed is what the HMAC covers: "body" (default) or "timestamp_body" (the timestamp
	// header's value, Separator, then the body).
	Signed          string `yaml:"signed"`
	TimestampHeader string `yaml:"timestamp_header"`
	Separator       string `yaml:"separator"`
	// AllowUnsignedReplay accepts a body-only signature (Signed "body"), which has no
	// timestamp to expire: a captured request verifies for ever. Without it such an endpoint is
	// refused; with it start-up warns (Warnings). Only for senders that sign nothing else.
	AllowUnsignedReplay bool `yaml:"allow_unsigned_replay"`
	// Event mapping.
	EventIDField    string `yaml:"event_id_field"`
	EventIDHeader   string `yaml:"event_id_header"` // used when the id is a header (one event per request)
	TypeField       string `yaml:"type_field"`
	MessageIDField  string `yaml:"message_id_field"`
	RecipientField  string `yaml:"recipient_field"`
	OccurredAtField string `yaml:"occurred_at_field"`
	// Bounce details of a bounced or failed event: the provider's bounce type (its value, or
	// BounceTypeMap's for it, hard or soft) and the remote server's reply text, which
	// internal/bounce classifies. Without them a bounce has no type and suppresses no one.
	BounceTypeField string            `yaml:"bounce_type_field"`
	BounceTypeMap   map[string]string `yaml:"bounce_type_map"`
	DiagnosticField string            `yaml:"diagnostic_field"`
	// StatusMap maps the provider's type to a status (accepted, deferred, delivered, failed,
	// bounced, complained) or to opened, clicked, unsubscribed or inbound. Unmapped types are
	// recorded and change nothing.
	StatusMap map[string]string `yaml:"status_map"`
}

// Reconcile is an endpoint's `reconcile:` block: how to reach its provider's API. Credentials
// come from the environment through ${VAR} and are never logged; the daily reconciliation and
// `mailhook backfill` read the same block, as providercounts.Settings (serve.CountsSettings),
// which also checks that the block suits the endpoint's provider.
type Reconcile struct {
	// BaseURL overrides the provider's API address (Mailgun's EU region, an SES endpoint for
	// the AWS SDK, a test's server).
	BaseURL string `yaml:"base_url"`
	// APIKey is SendGrid's API key (scope stats.read) or Mailgun's account API key (a domain
	// sending key cannot read metrics; a key with the Analyst role is the least that can).
	APIKey string `yaml:"api_key"`
	// ServerToken is Postmark's server API token.
	ServerToken string `yaml:"server_token"`
	// MessageStream narrows Postmark's counts and listings to one stream.
	MessageStream string `yaml:"message_stream"`
	// Domain is Mailgun's sending domain.
	Domain string `yaml:"domain"`
	// Region is Amazon SES's AWS region; its credentials come from the AWS SDK's standard chain.
	Region string `yaml:"region"`
	// Tolerance is how far a provider's count may be from what was received, per metric ("*"
	// for every metric not named).
	Tolerance map[string]CountTolerance `yaml:"tolerance"`
	// Backfill lets the daily run fetch back the events of a day with a gap (Mailgun, Postmark).
	Backfill bool `yaml:"backfill"`
	// Rate bounds the requests per second sent to the provider's API (0: the default, 2).
	Rate float64 `yaml:"rate"`
	// Timeout bounds one request (0: 30 s).
	Timeout time.Duration `yaml:"timeout"`
}

// CountTolerance is how far one metric's count may be from what was received: Absolute events,
// or Fraction of the provider's count, whichever is larger (providercounts.Tolerance).
type CountTolerance struct {
	Absolute int64   `yaml:"absolute"`
	Fraction float64 `yaml:"fraction"`
}
