// Package hmac is the configurable provider "hmac": for a sender mailhook has no adapter for
// that signs its webhooks with an HMAC in a header. The endpoint's generic settings
// (provider.Generic) say how it signs (header, prefix, SHA-256 or SHA-512, hex or base64, over
// the body or over timestamp+separator+body) and where its JSON keeps the event id, type, message
// id, recipient and time. A body may be one JSON object or an array of them (a batch).
// See docs/providers/hmac.md.
package hmac

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
	"github.com/mailhook/mailhook/internal/provider/fieldmap"
	"github.com/mailhook/mailhook/internal/signature"
)

// Name is the provider name endpoints are configured with and events are keyed by.
const Name = "hmac"

// DefaultTolerance bounds |now - timestamp| when the signature covers a timestamp and the
// endpoint sets no tolerance: the common replay window (Stripe, Standard Webhooks, Postscale).
const DefaultTolerance = 5 * time.Minute

// Values of generic.signed.
const (
	SignedBody          = "body"
	SignedTimestampBody = "timestamp_body"
)

// ErrSourceNotAllowed means the request came from outside every network in allow_cidrs.
var ErrSourceNotAllowed = errors.New("source address not allowed")

func init() {
	provider.Register(Name, New, provider.KeyedByEndpoint())
}

// Adapter verifies and parses one endpoint's requests.
type Adapter struct {
	scheme *signature.HMAC
	header string
	// timestampHeader is set when the signature covers "<timestamp><separator><body>".
	timestampHeader string
	allow           allowlist.List
	eventIDField    fieldmap.Path
	eventIDHeader   string
	m               *fieldmap.Mapping
}

var _ provider.Adapter = (*Adapter)(nil)

// New builds an adapter from the endpoint settings, checking every generic key; errors name the
// key at fault. Settings.Secrets are the HMAC keys, used as the raw bytes of each string (several
// while rotating: a signature made with any of them is accepted).
func New(s provider.Settings) (provider.Adapter, error) {
	if err := s.RequireSecrets(Name, "HMAC key"); err != nil {
		return nil, err
	}
	a := &Adapter{}
	opts := signature.HMACOptions{Secrets: s.Secrets}
	g := s.Generic
	if g == nil {
		return nil, errors.New("hmac: generic is required (at least generic.signature_header, generic.event_id_field or generic.event_id_header, and generic.message_id_field)")
	}
	switch {
	case len(s.TopicARNs) > 0:
		return nil, errors.New("hmac: topic_arns applies only to Amazon SES")
	case s.CertHostPattern != "":
		return nil, errors.New("hmac: cert_host_pattern applies only to Amazon SES")
	}

	var err error
	if a.header, err = headerName("generic.signature_header", g.SignatureHeader); err != nil {
		return nil, err
	}
	if a.header == "" {
		return nil, errors.New("hmac: generic.signature_header is required")
	}
	opts.Header, opts.Prefix = a.header, g.SignaturePrefix
	switch strings.ToLower(strings.TrimSpace(g.Algorithm)) {
	case "", "sha256":
	case "sha512":
		opts.SHA512 = true
	default:
		return nil, fmt.Errorf("hmac: generic.algorithm %q is not sha256 or sha512", g.Algorithm)
	}
	switch strings.ToLower(strings.TrimSpace(g.Encoding)) {
	case "", "hex":
	case "base64":
		opts.Base64 = true
	default:
		return nil, fmt.Errorf("hmac: generic.encoding %q is not hex or base64", g.Encoding)
	}
	switch strings.ToLower(strings.TrimSpace(g.Signed)) {
	case "", SignedBody:
		switch {
		case g.TimestampHeader != "":
			return nil, errors.New("hmac: generic.timestamp_header applies only with generic.signed: timestamp_body")
		case g.Separator != "":
			return nil, errors.New("hmac: generic.separator applies only with generic.signed: timestamp_body")
		case s.Tolerance != 0:
			return nil, errors.New("hmac: tolerance applies only with generic.signed: timestamp_body (a body-only signature has no timestamp)")
		case !g.AllowUnsignedReplay:
			// Nothing in the signature expires, so a captured request verifies for ever; under a
			// fresh event_id_header it is a new event. config.Validate refuses this first, naming
			// the key; New refuses too so that no adapter built around Validate accepts it silently.
			return nil, errors.New("hmac: generic.signed body signs no timestamp, so a captured request can be replayed for ever: " +
				"use generic.signed: timestamp_body, or set generic.allow_unsigned_replay: true to accept that")
		}
	case SignedTimestampBody:
		if g.AllowUnsignedReplay {
			return nil, errors.New("hmac: generic.allow_unsigned_replay applies only with generic.signed: body (timestamp_body already bounds replays by tolerance)")
		}
		if a.timestampHeader, err = headerName("generic.timestamp_header", g.TimestampHeader); err != nil {
			return nil, err
		}
		if a.timestampHeader == "" {
			return nil, errors.New("hmac: generic.timestamp_header is required with generic.signed: timestamp_body")
		}
		opts.TimestampHeader, opts.Separator = a.timestampHeader, g.Separator
		if opts.Tolerance, err = s.ToleranceOr(Name, DefaultTolerance); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("hmac: generic.signed %q is not %s or %s", g.Signed, SignedBody, SignedTimestampBody)
	}

	if a.eventIDField, err = fieldmap.ParsePath(Name, "generic.event_id_field", g.EventIDField); err != nil {
		return nil, err
	}
	if a.eventIDHeader, err = headerName("generic.event_id_header", g.EventIDHeader); err != nil {
		return nil, err
	}
	switch {
	case a.eventIDField == nil && a.eventIDHeader == "":
		return nil, errors.New("hmac: generic.event_id_field or generic.event_id_header is required: events are deduplicated on it")
	case a.eventIDField != nil && a.eventIDHeader != "":
		return nil, errors.New("hmac: set only one of generic.event_id_field and generic.event_id_header")
	}
	if a.m, err = fieldmap.New(Name, g); err != nil {
		return nil, err
	}
	if a.allow, err = allowlist.Parse(Name, s.AllowCIDRs); err != nil {
		return nil, err
	}
	if a.scheme, err = signature.NewHMAC(opts); err != nil {
		return nil, fmt.Errorf("hmac: secrets: %w", err)
	}
	return a, nil
}

// headerName validates a configured header name: an HTTP token, case-insensitive.
func headerName(key, v string) (string, error) {
	v = strings.TrimSpace(v)
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return "", fmt.Errorf("hmac: %s %q is not a valid header name", key, v)
		}
	}
	return v, nil
}

// Verify checks the source address (when allow_cidrs is set), the timestamp (when it is signed)
// and the HMAC over the raw body. Failures wrap provider.ErrUnauthorized and, innermost, one of
// the signature package's sentinels.
func (a *Adapter) Verify(r provider.Request) error {
	if !a.allow.Allows(r.RemoteIP) {
		return fmt.Errorf("hmac: %w: %w", provider.ErrUnauthorized, ErrSourceNotAllowed)
	}
	if err := a.verify(r); err != nil {
		return fmt.Errorf("hmac: %w: %w", provider.ErrUnauthorized, err)
	}
	return nil
}

func (a *Adapter) verify(r provider.Request) error {
	var stamp string
	if a.timestampHeader != "" {
		stamp = r.Header.Get(a.timestampHeader)
	}
	return a.scheme.Verify(r.Header.Get(a.header), stamp, r.Body, r.Now)
}
