package providercounts

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Settings is an endpoint's `reconcile:` block: how to reach its provider's API. Credentials
// come from the environment through ${VAR} (config expands them) and are never logged; the
// daily reconciliation and `mailhook backfill` read the same block.
type Settings struct {
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
	Tolerance map[string]Tolerance `yaml:"tolerance"`
	// Backfill lets the daily run fetch back the events of a day with a gap (Mailgun, Postmark).
	Backfill bool `yaml:"backfill"`
	// Rate bounds the requests per second sent to the provider's API (0: DefaultRate).
	Rate float64 `yaml:"rate"`
	// Timeout bounds one request (0: 30 s).
	Timeout time.Duration `yaml:"timeout"`
}

// The providers' API addresses, when base_url does not say another (Mailgun's EU region:
// https://api.eu.mailgun.net).
const (
	SendGridAPI = "https://api.sendgrid.com"
	MailgunAPI  = "https://api.mailgun.net"
	PostmarkAPI = "https://api.postmarkapp.com"
)

// DefaultRate is the request rate used when none is configured: below every supported
// provider's documented limit.
const DefaultRate = 2.0

// Supported names the providers whose counts can be read from an API.
var Supported = []string{"sendgrid", "mailgun", "postmark", "ses"}

// Listable names the providers whose events can be listed back (internal/backfill).
var Listable = []string{"mailgun", "postmark"}

// RequestRate is Rate, or DefaultRate when it is unset.
func (s Settings) RequestRate() float64 {
	if s.Rate > 0 {
		return s.Rate
	}
	return DefaultRate
}

// Tolerances returns the per-metric tolerances and the default for the metrics not named.
func (s Settings) Tolerances() (map[string]Tolerance, Tolerance) {
	tol := map[string]Tolerance{}
	var def Tolerance
	for k, t := range s.Tolerance {
		if k == "*" {
			def = t
			continue
		}
		tol[k] = t
	}
	return tol, def
}

// HTTPClient is a client whose requests time out after Timeout (30 s when unset).
func (s Settings) HTTPClient() *http.Client {
	t := s.Timeout
	if t <= 0 {
		t = 30 * time.Second
	}
	return &http.Client{Timeout: t}
}

// URL is BaseURL without a trailing slash, or def when it is unset.
func (s Settings) URL(def string) string {
	if s.BaseURL != "" {
		return strings.TrimRight(s.BaseURL, "/")
	}
	return def
}

// Validate checks the block for provider; errors name the field, never its value.
func (s Settings) Validate(provider string) error {
	if s.Rate < 0 {
		return fmt.Errorf("reconcile.rate %v is negative", s.Rate)
	}
	for k, t := range s.Tolerance {
		if t.Absolute < 0 || t.Fraction < 0 || t.Fraction > 1 {
			return fmt.Errorf("reconcile.tolerance[%q]: absolute must be ≥ 0 and fraction within [0, 1]", k)
		}
	}
	if s.Backfill && !slices.Contains(Listable, provider) {
		return fmt.Errorf("reconcile.backfill: provider %s has no events API mailhook lists (%s do)", provider, strings.Join(Listable, ", "))
	}
	need := func(field, v string) error {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("reconcile.%s is empty (is its ${ENV} variable set?)", field)
		}
		return nil
	}
	switch provider {
	case "sendgrid":
		return need("api_key", s.APIKey)
	case "postmark":
		return need("server_token", s.ServerToken)
	case "mailgun":
		if err := need("api_key", s.APIKey); err != nil {
			return err
		}
		return need("domain", s.Domain)
	case "ses":
		return need("region", s.Region)
	default:
		return fmt.Errorf("reconcile: provider %q publishes no counts API mailhook reads (supported: %s); compare with `mailhook report daily --expected FILE.csv`",
			provider, strings.Join(Supported, ", "))
	}
}

// New builds the Counter for provider from its settings.
func New(provider string, s Settings) (Counter, error) {
	if err := s.Validate(provider); err != nil {
		return nil, err
	}
	switch provider {
	case "sendgrid":
		return SendGrid{BaseURL: s.URL(SendGridAPI), APIKey: s.APIKey, Client: s.HTTPClient()}, nil
	case "postmark":
		return Postmark{BaseURL: s.URL(PostmarkAPI), ServerToken: s.ServerToken,
			MessageStream: s.MessageStream, Client: s.HTTPClient()}, nil
	case "mailgun":
		return Mailgun{BaseURL: s.URL(MailgunAPI), APIKey: s.APIKey, Domain: s.Domain, Client: s.HTTPClient()}, nil
	case "ses":
		// No default address: without BaseURL the SDK resolves the region's endpoint.
		return SES{Region: s.Region, BaseURL: s.URL(""), Timeout: s.Timeout}, nil
	}
	return nil, fmt.Errorf("reconcile: no counts reader for %s yet", provider)
}
