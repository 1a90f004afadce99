// Package postmark is the provider adapter for Postmark (postmarkapp.com) outbound webhooks:
// Delivery, Bounce, SpamComplaint, Open, Click and SubscriptionChange.
//
// Postmark signs nothing. An endpoint is protected by HTTP Basic credentials that Postmark sends
// because they are part of the webhook URL (https://user:password@host/webhooks/postmark), and
// optionally by an allow-list of Postmark's source addresses. See docs/providers/postmark.md.
package postmark

import (
	"errors"
	"fmt"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
	"github.com/mailhook/mailhook/internal/provider/basicauth"
)

// Name is the provider name endpoints are configured with and events are keyed by.
const Name = "postmark"

// Verification failures. Their messages are short and free of request data: the HTTP layer
// returns the innermost error as the reason of a 401.
var (
	// ErrMissingCredentials means the request carried no usable Basic credentials.
	ErrMissingCredentials = basicauth.ErrMissingCredentials
	// ErrWrongCredentials means the credentials match none of the configured pairs.
	ErrWrongCredentials = basicauth.ErrWrongCredentials
	// ErrSourceNotAllowed means the request came from outside every allowed network.
	ErrSourceNotAllowed = errors.New("source address not allowed")
)

func init() {
	provider.Register(Name, New)
}

// Adapter verifies and parses Postmark webhooks for one endpoint.
type Adapter struct {
	creds basicauth.Set
	allow allowlist.List
}

var _ provider.Adapter = (*Adapter)(nil)

// New builds an adapter. Settings.Secrets holds one or more "user:password" pairs (several while
// rotating); Settings.AllowCIDRs optionally restricts source addresses (CIDRs or single IPs).
// Settings Postmark cannot use (tolerance: it signs no timestamp; generic; SNS keys) are rejected
// rather than silently ignored.
func New(s provider.Settings) (provider.Adapter, error) {
	if err := s.RequireSecrets(Name, `"user:password" pair`); err != nil {
		return nil, err
	}
	a := &Adapter{}
	for i, sec := range s.Secrets {
		if err := a.creds.Add(Name, i, sec); err != nil {
			return nil, err
		}
	}
	allow, err := allowlist.Parse(Name, s.AllowCIDRs)
	if err != nil {
		return nil, err
	}
	a.allow = allow
	switch {
	case s.Tolerance != 0:
		return nil, errors.New("postmark: tolerance does not apply: Postmark signs no timestamp")
	case s.Generic != nil:
		return nil, errors.New(`postmark: generic applies only to providers "hmac" and "standard-webhooks"`)
	case len(s.TopicARNs) > 0:
		return nil, errors.New("postmark: topic_arns applies only to Amazon SES")
	case s.CertHostPattern != "":
		return nil, errors.New("postmark: cert_host_pattern applies only to Amazon SES")
	}
	return a, nil
}

// Verify checks the source address (when an allow-list is configured) and then the Basic
// credentials (basicauth: every pair compared in constant time).
func (a *Adapter) Verify(r provider.Request) error {
	if !a.allow.Allows(r.RemoteIP) {
		return fmt.Errorf("postmark: %w: %w", provider.ErrUnauthorized, ErrSourceNotAllowed)
	}
	if err := a.creds.Verify(r.Header); err != nil {
		return fmt.Errorf("postmark: %w: %w", provider.ErrUnauthorized, err)
	}
	return nil
}

// Parse turns a verified body into exactly one normalized event: Postmark sends one record per
// request.
func (a *Adapter) Parse(r provider.Request) ([]domain.Event, error) {
	return provider.One(parse(r.Body, r.Now))
}
