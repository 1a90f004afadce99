// Package postscale is the provider adapter for Postscale (postscale.io) webhooks.
//
// Postscale's public docs describe two payload shapes and leave parts of the signature scheme
// unstated (see shared/reference/providers.md §1). This adapter implements the variant mailhook
// settled on: "t=<unix>,v1=<hex>" over "<t>.<raw body>", keyed with the whole "whsec_…" string.
package postscale

import (
	"fmt"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
	"github.com/mailhook/mailhook/internal/signature"
)

// Name is the provider name endpoints are configured with and events are keyed by.
const Name = "postscale"

// Request headers Postscale sends.
const (
	SignatureHeader = "X-Postscale-Signature"
	// DeliveryIDHeader is unique per attempt, so it identifies an attempt in logs but cannot
	// dedupe retries of one event; the event id in the body does that.
	DeliveryIDHeader = "X-Postscale-Delivery-ID"
)

// DefaultTolerance is Postscale's recommended replay window.
const DefaultTolerance = 5 * time.Minute

func init() {
	provider.Register(Name, New)
}

// Adapter verifies and parses Postscale webhooks for one endpoint.
type Adapter struct {
	scheme *signature.Timestamped
	allow  allowlist.List // allow_cidrs; empty allows every address
}

var _ provider.Adapter = (*Adapter)(nil)

// New builds an adapter. It requires at least one secret and no empty ones: Postscale's legacy
// unsigned endpoints are deliberately not supported, since an unsigned endpoint would accept
// anyone's events. A zero tolerance means DefaultTolerance.
func New(s provider.Settings) (provider.Adapter, error) {
	tol, allow, err := s.CheckSigned(Name, "signing secret", DefaultTolerance)
	if err != nil {
		return nil, err
	}
	scheme, err := signature.NewTimestamped(s.Secrets, tol)
	if err != nil {
		return nil, fmt.Errorf("postscale: secrets: %w", err)
	}
	return &Adapter{scheme: scheme, allow: allow}, nil
}

// Verify checks X-Postscale-Signature over the raw body. Failures wrap both
// provider.ErrUnauthorized and the signature package's sentinel (the last one, so that the
// innermost error names the reason).
func (a *Adapter) Verify(r provider.Request) error {
	if !a.allow.Allows(r.RemoteIP) {
		return fmt.Errorf("%s: %w: source address not allowed", Name, provider.ErrUnauthorized)
	}
	if err := a.scheme.Verify(r.Header.Get(SignatureHeader), r.Body, r.Now); err != nil {
		return fmt.Errorf("postscale: %w: %w", provider.ErrUnauthorized, err)
	}
	return nil
}

// Parse turns a verified body into exactly one normalized event.
func (a *Adapter) Parse(r provider.Request) ([]domain.Event, error) {
	return provider.One(parse(r.Body))
}
