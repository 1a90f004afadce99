// Package standardwebhooks is the provider adapter for senders that sign with Standard Webhooks
// (standardwebhooks.com), Svix's scheme. It registers two providers:
//
//   - "resend": Resend, which delivers through Svix, with Resend's event types built in;
//   - "standard-webhooks": any other Standard Webhooks sender, whose JSON is mapped onto events by
//     the endpoint's generic settings (provider.Generic).
//
// Both verify "v1,<base64 HMAC-SHA256>" over "<id>.<timestamp>.<raw body>", keyed by the
// base64-decoded part of a "whsec_…" secret, with signature.Standard, and both take the
// event id from the webhook-id (svix-id) header, which stays the same on every retry of a message.
// See docs/providers/resend.md and docs/providers/standard-webhooks.md.
package standardwebhooks

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
	"github.com/mailhook/mailhook/internal/provider/fieldmap"
	"github.com/mailhook/mailhook/internal/signature"
)

// Provider names.
const (
	NameStandard = "standard-webhooks"
	NameResend   = "resend"
)

// Header names. Standard Webhooks senders use the webhook-* set (signature.HeaderWebhookID and
// friends); Svix, and so Resend, sends the same values under svix-*. Both sets are accepted by both
// providers, the provider's own set first.
const (
	HeaderSvixID        = "svix-id"
	HeaderSvixTimestamp = "svix-timestamp"
	HeaderSvixSignature = "svix-signature"
)

// DefaultTolerance is how far webhook-timestamp may be from now, in either direction. It is the
// window the official Standard Webhooks and Svix libraries hard-code; Svix stamps every attempt
// (retries included) with the time of that attempt, so a legitimate request is never older.
const DefaultTolerance = 5 * time.Minute

// ErrSourceNotAllowed means the request came from outside every network in allow_cidrs.
var ErrSourceNotAllowed = errors.New("source address not allowed")

func init() {
	provider.Register(NameStandard, NewStandard, provider.KeyedByEndpoint())
	provider.Register(NameResend, NewResend)
}

type headerSet struct{ id, timestamp, signature string }

var (
	webhookHeaders = headerSet{signature.HeaderWebhookID, signature.HeaderWebhookTimestamp, signature.HeaderWebhookSignature}
	svixHeaders    = headerSet{HeaderSvixID, HeaderSvixTimestamp, HeaderSvixSignature}
)

// Adapter verifies and parses one endpoint's requests for either provider.
type Adapter struct {
	name string
	// schemes holds one verifier per configured secret, several while rotating.
	schemes []*signature.Standard
	allow   allowlist.List
	own     headerSet
	other   headerSet
	// generic is the body mapping of a "standard-webhooks" endpoint; nil for Resend.
	generic *fieldmap.Mapping
}

var _ provider.Adapter = (*Adapter)(nil)

// NewResend builds a Resend adapter. Settings.Secrets holds the endpoint's "whsec_…" signing
// secret(s), several while rotating; a zero tolerance means DefaultTolerance. Resend needs no
// generic mapping and rejects one.
func NewResend(s provider.Settings) (provider.Adapter, error) {
	a, err := newAdapter(NameResend, s)
	if err != nil {
		return nil, err
	}
	if s.Generic != nil {
		return nil, errors.New(`resend: generic applies only to providers "hmac" and "standard-webhooks"`)
	}
	a.own, a.other = svixHeaders, webhookHeaders
	return a, nil
}

// NewStandard builds a generic Standard Webhooks adapter. Besides the secrets it needs
// Settings.Generic to say where the event type and message id are in the body (see mapping).
func NewStandard(s provider.Settings) (provider.Adapter, error) {
	a, err := newAdapter(NameStandard, s)
	if err != nil {
		return nil, err
	}
	if a.generic, err = newMapping(NameStandard, s.Generic); err != nil {
		return nil, err
	}
	a.own, a.other = webhookHeaders, svixHeaders
	return a, nil
}

func newAdapter(name string, s provider.Settings) (*Adapter, error) {
	tol, allow, err := s.CheckSigned(name, "whsec_ signing secret", DefaultTolerance)
	if err != nil {
		return nil, err
	}
	schemes := make([]*signature.Standard, 0, len(s.Secrets))
	for i, sec := range s.Secrets {
		scheme, err := signature.NewStandard(sec, tol)
		if err != nil {
			// The error names the key, never the secret.
			return nil, fmt.Errorf("%s: secrets[%d] is not a whsec_<base64> signing secret", name, i)
		}
		schemes = append(schemes, scheme)
	}
	switch {
	case len(s.TopicARNs) > 0:
		return nil, fmt.Errorf("%s: topic_arns applies only to Amazon SES", name)
	case s.CertHostPattern != "":
		return nil, fmt.Errorf("%s: cert_host_pattern applies only to Amazon SES", name)
	}
	return &Adapter{name: name, schemes: schemes, allow: allow}, nil
}

// headers returns the id, timestamp and signature header values: the provider's own set when
// any of its headers is present, otherwise the other set. The sets are never mixed.
func (a *Adapter) headers(h http.Header) (id, ts, sig string) {
	for _, set := range []headerSet{a.own, a.other} {
		id, ts, sig = h.Get(set.id), h.Get(set.timestamp), h.Get(set.signature)
		if id != "" || ts != "" || sig != "" {
			return id, ts, sig
		}
	}
	return "", "", ""
}

// Verify checks the source address (when allow_cidrs is set) and the signature over the raw
// body. The request is accepted when any v1 signature in the header matches any configured
// secret. Failures wrap provider.ErrUnauthorized and, innermost, a signature sentinel.
func (a *Adapter) Verify(r provider.Request) error {
	if !a.allow.Allows(r.RemoteIP) {
		return fmt.Errorf("%s: %w: %w", a.name, provider.ErrUnauthorized, ErrSourceNotAllowed)
	}
	id, ts, sig := a.headers(r.Header)
	var err error
	for _, scheme := range a.schemes {
		if err = scheme.Verify(id, ts, sig, r.Body, r.Now); err == nil {
			return nil
		}
		// Missing headers, a malformed header or a stale timestamp fail for every secret alike.
		if !errors.Is(err, signature.ErrNoMatchingSignature) {
			break
		}
	}
	return fmt.Errorf("%s: %w: %w", a.name, provider.ErrUnauthorized, err)
}

// Parse turns a verified body into exactly one event whose id is the webhook id.
func (a *Adapter) Parse(r provider.Request) ([]domain.Event, error) {
	id, _, _ := a.headers(r.Header)
	id = strings.TrimSpace(id)
	if id == "" {
		return nil, provider.BadRequest(a.name, "no %s header", a.own.id)
	}
	var (
		ev  domain.Event
		err error
	)
	if a.generic != nil {
		ev, err = parseGeneric(a.generic, a.name, r.Body)
	} else {
		ev, err = parseResend(r.Body)
	}
	if err != nil {
		return nil, err
	}
	ev.Provider, ev.EventID = a.name, id
	return []domain.Event{ev}, nil
}
