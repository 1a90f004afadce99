// Package sendgrid is the provider adapter for the Twilio SendGrid Event Webhook.
//
// SendGrid's Signed Event Webhook signs every POST with ECDSA P-256: the signature is over
// SHA-256 of the X-Twilio-Email-Event-Webhook-Timestamp header value immediately followed by the
// raw body (no separator), sent base64-encoded ASN.1 DER in X-Twilio-Email-Event-Webhook-Signature.
// The body is a JSON array of events (a batch). See docs/providers/sendgrid.md.
package sendgrid

import (
	"crypto/ecdsa"
	"fmt"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
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
	scheme *signature.ECDSA
	allow  allowlist.List // allow_cidrs; empty allows every address
}

var _ provider.Adapter = (*Adapter)(nil)

// New builds an adapter. Settings.Secrets are the Signed Event Webhook verification keys as the
// dashboard shows them: base64 DER (PKIX) P-256 public keys, or the same in PEM. Several may be
// configured (key regeneration, several SendGrid accounts or subusers posting to one endpoint); a
// request is accepted when any of them verifies it. A key that does not parse is rejected here,
// not on the first request. A zero tolerance means DefaultTolerance.
func New(s provider.Settings) (provider.Adapter, error) {
	tol, allow, err := s.CheckSigned(Name, "verification key (the Signed Event Webhook public key)", DefaultTolerance)
	if err != nil {
		return nil, err
	}
	keys := make([]*ecdsa.PublicKey, 0, len(s.Secrets))
	for i, sec := range s.Secrets {
		k, err := signature.ParseECDSAPublicKey(sec)
		if err != nil {
			return nil, fmt.Errorf("sendgrid: secrets[%d]: %w", i, err)
		}
		keys = append(keys, k)
	}
	scheme, err := signature.NewECDSA(keys, tol)
	if err != nil {
		return nil, fmt.Errorf("sendgrid: secrets: %w", err)
	}
	return &Adapter{scheme: scheme, allow: allow}, nil
}

// Verify checks the Signed Event Webhook signature over the raw body. Failures wrap
// provider.ErrUnauthorized and, last, one of the signature package's sentinels, so the innermost
// error is a short reason that echoes nothing from the request.
func (a *Adapter) Verify(r provider.Request) error {
	if !a.allow.Allows(r.RemoteIP) {
		return fmt.Errorf("%s: %w: source address not allowed", Name, provider.ErrUnauthorized)
	}
	if err := a.verify(r.Header.Get(SignatureHeader), r.Header.Get(TimestampHeader), r.Body, r.Now); err != nil {
		return fmt.Errorf("sendgrid: %w: %w", provider.ErrUnauthorized, err)
	}
	return nil
}

// verify names the missing header itself; the scheme checks the rest.
func (a *Adapter) verify(sig, ts string, body []byte, now time.Time) error {
	switch {
	case sig == "" && ts == "":
		return signature.ErrMissingSignature
	case sig == "":
		return fmt.Errorf("%w: no %s header", signature.ErrMissingSignature, SignatureHeader)
	case ts == "":
		return fmt.Errorf("%w: no %s header", signature.ErrMissingSignature, TimestampHeader)
	}
	return a.scheme.Verify(sig, ts, body, now)
}

// Parse turns a verified body (a JSON array) into one event per element. A body that is not a
// non-empty array of objects each with a string sg_event_id and event fails as a whole.
func (a *Adapter) Parse(r provider.Request) ([]domain.Event, error) {
	return parse(r.Body)
}
