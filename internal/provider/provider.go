// Package provider defines what every provider adapter implements and the registry that maps a
// configured provider name to its adapter. Adding a provider is one package that calls Register
// from init, one blank import in internal/serve, and its fixtures.
package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
)

// Settings is the per-endpoint configuration an adapter is built from. Each provider uses the
// fields its scheme needs and rejects settings it cannot use.
type Settings struct {
	// Secrets are all currently valid credentials, several during a rotation: HMAC signing
	// secrets, verification public keys (SendGrid), or "user:password" pairs (Postmark).
	Secrets []string `yaml:"secrets"`
	// Tolerance is how far a signed timestamp may be from now, in either direction. Zero means
	// the provider's default; providers that do not sign a timestamp ignore it.
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
	// HTTPClient makes the adapter's outbound calls (SNS certificates and subscription
	// confirmations). Set by the process, not the config; nil means a client with a timeout.
	HTTPClient *http.Client `yaml:"-"`
}

// Generic maps a provider's JSON onto events and says how it signs. Field paths are dotted
// (data.email_id); a body that is a JSON array is a batch of events.
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
	// refused; with it start-up warns (config.Warnings). Only for senders that sign nothing else.
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

// Request is one webhook request as an adapter sees it.
type Request struct {
	Ctx    context.Context
	Header http.Header
	// Body is the raw bytes, exactly as received: signatures are verified over these.
	Body []byte
	// RemoteIP is the address the request came from.
	RemoteIP string
	Now      time.Time
}

// Adapter verifies and parses one provider's webhook requests.
type Adapter interface {
	// Verify authenticates the request (signature over the raw body, credentials, source
	// address). It returns an error wrapping ErrUnauthorized when the request must be rejected.
	Verify(r Request) error
	// Parse turns a verified body into normalized events. It returns an error wrapping
	// ErrBadRequest when the body can never be accepted.
	Parse(r Request) ([]domain.Event, error)
}

// Controller is implemented by adapters whose provider also sends control messages that are not
// events (SNS subscription confirmations). Control runs after Verify; when it reports handled,
// the request is answered 200 with the returned status and no workflow starts.
type Controller interface {
	Control(r Request) (handled bool, status string, err error)
}

// Nonce is a single-use value a provider signs without signing the event itself (Mailgun signs
// a timestamp and a token, not event-data).
type Nonce struct {
	Value string
	// Expires is when the signature stops verifying (its timestamp plus the tolerance): the
	// binding need not outlive it.
	Expires time.Time
}

// NonceBinder is implemented by adapters whose signature does not cover the event: a captured
// signature would sign any event until it expires. The handler binds the nonce to the first
// event id it arrives with and refuses it with any other (a retry of the event still passes).
// Nonce runs after a successful Verify.
type NonceBinder interface {
	Nonce(r Request) (Nonce, bool)
}

// Rejecter is implemented by adapters whose provider stops retrying on a specific status
// (Mailgun: 406). That status replaces 400 and 401 for requests a retry can never fix.
type Rejecter interface {
	RejectStatus() int
}

// ErrUnauthorized marks a verification failure (401).
var ErrUnauthorized = errors.New("unauthorized")

// ErrBadRequest marks a body that can never be accepted (400).
var ErrBadRequest = errors.New("bad request")

// Factory builds an adapter from endpoint settings; it rejects settings it cannot use.
type Factory func(Settings) (Adapter, error)

// Option changes how a provider is registered.
type Option func(*registration)

// WithoutSecrets registers a provider that authenticates without configured secrets (SES
// verifies with Amazon's certificates).
func WithoutSecrets() Option { return func(r *registration) { r.noSecrets = true } }

// KeyedByEndpoint registers a generic provider (hmac, standard-webhooks) whose events are
// namespaced by the endpoint name instead of the provider name: two unrelated senders behind
// the same generic provider must never share event ids or message ids.
func KeyedByEndpoint() Option { return func(r *registration) { r.byEndpoint = true } }

type registration struct {
	factory    Factory
	noSecrets  bool
	byEndpoint bool
}

var (
	mu       sync.RWMutex
	registry = map[string]registration{}
)

// Register makes a provider available under name. Adapters call it from init.
func Register(name string, f Factory, opts ...Option) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[name]; dup {
		panic("provider registered twice: " + name)
	}
	r := registration{factory: f}
	for _, o := range opts {
		o(&r)
	}
	registry[name] = r
}

// New builds the adapter registered under name.
func New(name string, s Settings) (Adapter, error) {
	mu.RLock()
	r, ok := registry[name]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (known: %v)", name, Names())
	}
	return r.factory(s)
}

// NeedsSecrets reports whether endpoints of the provider must configure secrets.
func NeedsSecrets(name string) bool {
	mu.RLock()
	defer mu.RUnlock()
	r, ok := registry[name]
	return !ok || !r.noSecrets
}

// EventNamespace is what an endpoint's events are keyed under (their Provider field, the first
// part of the workflow ID and of /v1/messages paths): the endpoint name for generic providers,
// the provider name otherwise.
func EventNamespace(providerName, endpoint string) string {
	mu.RLock()
	defer mu.RUnlock()
	if r, ok := registry[providerName]; ok && r.byEndpoint {
		return endpoint
	}
	return providerName
}

// Names lists the registered providers, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
