// Package sendgrid is the provider adapter for the Twilio SendGrid Event Webhook.
//
// SendGrid's Signed Event Webhook signs every POST with ECDSA P-256: the signature is over
// SHA-256 of the X-Twilio-Email-Event-Webhook-Timestamp header value immediately followed by the
// raw body (no separator), sent base64-encoded ASN.1 DER in X-Twilio-Email-Event-Webhook-Signature.
// The body is a JSON array of events (a batch). The same endpoint takes Inbound Parse POSTs
// (multipart/form-data): inbound.go. See docs/providers/sendgrid.md.
package sendgrid

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
	"github.com/mailhook/mailhook/internal/provider/basicauth"
	"github.com/mailhook/mailhook/internal/signature"
)

// Name is the provider name endpoints are configured with and events are keyed by.
const Name = "sendgrid"

// Request headers of the Signed Event Webhook.
const (
	SignatureHeader = "X-Twilio-Email-Event-Webhook-Signature"
	TimestampHeader = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// DefaultTolerance bounds |now - signed timestamp|. SendGrid retries a failed POST "at increasing
// intervals for up to 24 hours after the event occurs" and does not document whether a retry is
// re-signed, so the window must admit a retry that still carries the first attempt's timestamp:
// 24 hours plus an hour of margin. Replays inside the window are harmless because every event is
// deduplicated on sg_event_id for good. See docs/providers/sendgrid.md.
const DefaultTolerance = 25 * time.Hour

func init() {
	provider.Register(Name, New)
}

// Adapter verifies and parses SendGrid Event Webhook requests for one endpoint.
type Adapter struct {
	scheme *signature.ECDSA // nil when the endpoint lists no key (Inbound Parse with credentials only)
	// parseScheme verifies signed Inbound Parse POSTs with the same keys and the Parse tolerance.
	parseScheme *signature.ECDSA
	creds       basicauth.Set  // "user:password" pairs of an Inbound Parse URL
	allow       allowlist.List // allow_cidrs; empty allows every address
}

var _ provider.Adapter = (*Adapter)(nil)

// New builds an adapter. Settings.Secrets are the verification keys as the dashboard shows them:
// base64 DER (PKIX) P-256 public keys, or the same in PEM (the Signed Event Webhook's, and an
// Inbound Parse security policy's). Several may be configured (key regeneration, several SendGrid
// accounts or subusers posting to one endpoint); a request is accepted when any of them verifies
// it. A secret with a colon is instead a "user:password" pair that Inbound Parse POSTs may
// authenticate with (the credentials of the Parse URL); it never authenticates Event Webhook
// JSON. A key that does not parse is rejected here, not on the first request. A zero tolerance
// means DefaultTolerance for the Event Webhook and DefaultParseTolerance for Inbound Parse.
func New(s provider.Settings) (provider.Adapter, error) {
	tol, allow, err := s.CheckSigned(Name, "verification key (the Signed Event Webhook public key)", DefaultTolerance)
	if err != nil {
		return nil, err
	}
	a := &Adapter{allow: allow}
	keys := make([]*ecdsa.PublicKey, 0, len(s.Secrets))
	for i, sec := range s.Secrets {
		if basicauth.IsPair(sec) {
			if err := a.creds.Add(Name, i, sec); err != nil {
				return nil, err
			}
			continue
		}
		k, err := signature.ParseECDSAPublicKey(sec)
		if err != nil {
			return nil, fmt.Errorf("sendgrid: secrets[%d]: %w", i, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return a, nil
	}
	parseTol := tol
	if s.Tolerance == 0 {
		parseTol = DefaultParseTolerance
	}
	if a.scheme, err = signature.NewECDSA(keys, tol); err != nil {
		return nil, fmt.Errorf("sendgrid: secrets: %w", err)
	}
	if a.parseScheme, err = signature.NewECDSA(keys, parseTol); err != nil {
		return nil, fmt.Errorf("sendgrid: secrets: %w", err)
	}
	return a, nil
}

// Verify checks the Signed Event Webhook signature over the raw body. Failures wrap
// provider.ErrUnauthorized and, last, one of the signature package's sentinels, so the innermost
// error is a short reason that echoes nothing from the request.
func (a *Adapter) Verify(r provider.Request) error {
	if !a.allow.Allows(r.RemoteIP) {
		return fmt.Errorf("%s: %w: source address not allowed", Name, provider.ErrUnauthorized)
	}
	var err error
	switch {
	case isParse(r.Header):
		err = a.verifyParse(r)
	case a.scheme == nil:
		err = errNoKey
	default:
		err = a.verifyWith(a.scheme, r.Header.Get(SignatureHeader), r.Header.Get(TimestampHeader), r.Body, r.Now)
	}
	if err != nil {
		return fmt.Errorf("sendgrid: %w: %w", provider.ErrUnauthorized, err)
	}
	return nil
}

// errNoKey refuses Event Webhook JSON on an endpoint configured with Inbound Parse credentials
// only: nothing could verify its signature.
var errNoKey = errors.New("no verification key configured for the Event Webhook")

// verifyWith names the missing header itself; the scheme checks the rest.
func (a *Adapter) verifyWith(scheme *signature.ECDSA, sig, ts string, body []byte, now time.Time) error {
	switch {
	case sig == "" && ts == "":
		return signature.ErrMissingSignature
	case sig == "":
		return fmt.Errorf("%w: no %s header", signature.ErrMissingSignature, SignatureHeader)
	case ts == "":
		return fmt.Errorf("%w: no %s header", signature.ErrMissingSignature, TimestampHeader)
	}
	return scheme.Verify(sig, ts, body, now)
}

// Parse turns a verified body (a JSON array) into one event per element. A body that is not a
// non-empty array of objects each with a string sg_event_id and event fails as a whole.
// An Inbound Parse POST is one email.received.
func (a *Adapter) Parse(r provider.Request) ([]domain.Event, error) {
	if isParse(r.Header) {
		return provider.One(parseInbound(r))
	}
	return parse(r.Body)
}
