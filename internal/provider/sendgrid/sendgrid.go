// Package sendgrid is the provider adapter for the Twilio SendGrid Event Webhook.
//
// SendGrid's Signed Event Webhook signs every POST with ECDSA P-256: the signature is over
// SHA-256 of the X-Twilio-Email-Event-Webhook-Timestamp header value immediately followed by the
// raw body (no separator), sent base64-encoded ASN.1 DER in X-Twilio-Email-Event-Webhook-Signature.
// The body is a JSON array of events (a batch). See docs/providers/sendgrid.md.
package sendgrid

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
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

// Limits on the signature headers. A DER ECDSA P-256 signature is at most 72 bytes (96 base64
// characters); the caps keep hostile headers from costing more than a legitimate one.
const (
	maxSignatureLen = 256
	maxTimestampLen = 18 // 18 digits cannot overflow int64
)

func init() {
	provider.Register(Name, New)
}

// Adapter verifies and parses SendGrid Event Webhook requests for one endpoint.
type Adapter struct {
	keys      []*ecdsa.PublicKey
	tolerance time.Duration
	allow     allowlist.List // allow_cidrs; empty allows every address
}

var _ provider.Adapter = (*Adapter)(nil)

// New builds an adapter. Settings.Secrets are the Signed Event Webhook verification keys as the
// dashboard shows them: base64 DER (PKIX) P-256 public keys, or the same in PEM. Several may be
// configured (key regeneration, several SendGrid accounts or subusers posting to one endpoint); a
// request is accepted when any of them verifies it. A key that does not parse is rejected here,
// not on the first request. A zero tolerance means DefaultTolerance.
func New(s provider.Settings) (provider.Adapter, error) {
	if len(s.Secrets) == 0 {
		return nil, errors.New("sendgrid: secrets: at least one verification key (the Signed Event Webhook public key) is required")
	}
	keys := make([]*ecdsa.PublicKey, 0, len(s.Secrets))
	for i, sec := range s.Secrets {
		k, err := parsePublicKey(sec)
		if err != nil {
			return nil, fmt.Errorf("sendgrid: secrets[%d]: %w", i, err)
		}
		keys = append(keys, k)
	}
	if s.Tolerance < 0 {
		return nil, fmt.Errorf("sendgrid: tolerance %s is negative", s.Tolerance)
	}
	tol := s.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	allow, err := allowlist.Parse(Name, s.AllowCIDRs)
	if err != nil {
		return nil, err
	}
	return &Adapter{keys: keys, tolerance: tol, allow: allow}, nil
}

// parsePublicKey decodes a verification key. Error messages never include the key text.
func parsePublicKey(s string) (*ecdsa.PublicKey, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("is empty")
	}
	var der []byte
	if strings.HasPrefix(s, "-----BEGIN") {
		block, _ := pem.Decode([]byte(s))
		if block == nil || block.Type != "PUBLIC KEY" {
			return nil, errors.New("is not a PEM \"PUBLIC KEY\" block")
		}
		der = block.Bytes
	} else {
		// Keys pasted from the dashboard sometimes carry line breaks; base64 has no spaces.
		compact := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, s)
		var err error
		if der, err = base64.StdEncoding.DecodeString(compact); err != nil {
			return nil, errors.New("is not base64 (expected the verification key from the Signed Event Webhook settings)")
		}
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("is not a DER (PKIX) public key")
	}
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, errors.New("is not an ECDSA P-256 public key")
	}
	return k, nil
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

func (a *Adapter) verify(sig, ts string, body []byte, now time.Time) error {
	switch {
	case sig == "" && ts == "":
		return signature.ErrMissingSignature
	case sig == "":
		return fmt.Errorf("%w: no %s header", signature.ErrMissingSignature, SignatureHeader)
	case ts == "":
		return fmt.Errorf("%w: no %s header", signature.ErrMissingSignature, TimestampHeader)
	case len(sig) > maxSignatureLen:
		return fmt.Errorf("%w: signature is %d bytes, limit %d", signature.ErrMalformedSignature, len(sig), maxSignatureLen)
	}
	unix, ok := signature.ParseUnix(ts)
	if !ok {
		return fmt.Errorf("%w: timestamp is not unix seconds", signature.ErrMalformedSignature)
	}
	der, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(der) == 0 {
		return fmt.Errorf("%w: signature is not base64", signature.ErrMalformedSignature)
	}
	// Checked before the (comparatively expensive) ECDSA verification.
	if signed := time.Unix(unix, 0); !signature.WithinTolerance(signed, now, a.tolerance) {
		return fmt.Errorf("%w: signed at %d, %s from now, tolerance %s",
			signature.ErrTimestampOutOfTolerance, unix, now.Sub(signed).Round(time.Second), a.tolerance)
	}
	d := digest(ts, body)
	for _, k := range a.keys {
		if ecdsa.VerifyASN1(k, d[:], der) {
			return nil
		}
	}
	return fmt.Errorf("%w: checked against %d key(s)", signature.ErrNoMatchingSignature, len(a.keys))
}

// Parse turns a verified body (a JSON array) into one event per element. A body that is not a
// non-empty array of objects each with a string sg_event_id and event fails as a whole.
func (a *Adapter) Parse(r provider.Request) ([]domain.Event, error) {
	return parse(r.Body)
}

// digest is SHA-256 of timestamp || body, what SendGrid signs.
func digest(ts string, body []byte) [sha256.Size]byte {
	h := sha256.New()
	_, _ = io.WriteString(h, ts)
	_, _ = h.Write(body)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// Sign returns the X-Twilio-Email-Event-Webhook-Signature value SendGrid would send for body
// signed at ts (the exact X-Twilio-Email-Event-Webhook-Timestamp header value). It is the sender
// side of Verify, for tests and the simulator, with a locally generated P-256 key. It panics if
// the key cannot sign, which only a malformed key causes.
func Sign(priv *ecdsa.PrivateKey, ts string, body []byte) string {
	d := digest(ts, body)
	sig, err := ecdsa.SignASN1(rand.Reader, priv, d[:])
	if err != nil {
		panic("sendgrid: sign: " + err.Error())
	}
	return base64.StdEncoding.EncodeToString(sig)
}

// SignRequest sets both signature headers on req as SendGrid would for body at now. It does not
// touch the request body.
func SignRequest(req *http.Request, priv *ecdsa.PrivateKey, body []byte, now time.Time) {
	ts := strconv.FormatInt(now.Unix(), 10)
	req.Header.Set(TimestampHeader, ts)
	req.Header.Set(SignatureHeader, Sign(priv, ts, body))
}

// PublicKeyBase64 encodes pub the way the SendGrid dashboard shows a verification key (base64
// DER PKIX), ready for Settings.Secrets. It panics for a key x509 cannot marshal.
func PublicKeyBase64(pub *ecdsa.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic("sendgrid: marshal public key: " + err.Error())
	}
	return base64.StdEncoding.EncodeToString(der)
}
