// Package mailgun is the provider adapter for Mailgun webhooks (the JSON webhooks Mailgun has sent
// since 2018; the form-encoded "legacy" webhooks, shut down in 2023, are not supported).
//
// Mailgun signs inside the body: {"signature":{"timestamp","token","signature"},"event-data":{…}}
// where signature = hex(HMAC-SHA256(webhook signing key, timestamp + token)). The signature does
// not cover event-data. One event per request. See docs/providers/mailgun.md.
package mailgun

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
	"github.com/mailhook/mailhook/internal/signature"
)

// Name is the provider name endpoints are configured with and events are keyed by.
const Name = "mailgun"

// DefaultTolerance bounds |now - signature.timestamp|. A Mailgun retry re-sends the original
// signature block, and Mailgun retries for about 8 hours (the longest documented schedule is
// 10m, 10m, 15m, 30m, 1h, 2h, 4h: the last attempt 8h05m after the first). A rejected retry is
// answered 406, which makes Mailgun drop the event for good, so the window covers the whole
// schedule plus margin. See docs/providers/mailgun.md.
const DefaultTolerance = 9 * time.Hour

func init() {
	provider.Register(Name, New)
}

// Adapter verifies and parses Mailgun webhooks for one endpoint.
type Adapter struct {
	scheme    *signature.TokenHMAC
	tolerance time.Duration  // also how long a token stays bound (Nonce)
	allow     allowlist.List // allow_cidrs; empty allows every address
}

var (
	_ provider.Adapter     = (*Adapter)(nil)
	_ provider.Rejecter    = (*Adapter)(nil)
	_ provider.NonceBinder = (*Adapter)(nil)
)

// New builds an adapter. Settings.Secrets are HTTP webhook signing keys; several are allowed
// during a rotation (or for a parent account and its subaccounts) and a request is accepted when
// any of them matches. A zero tolerance means DefaultTolerance.
func New(s provider.Settings) (provider.Adapter, error) {
	// A blank key (white space included) is public knowledge: anyone could produce a matching
	// signature. CheckSigned refuses it.
	tol, allow, err := s.CheckSigned(Name, "webhook signing key", DefaultTolerance)
	if err != nil {
		return nil, err
	}
	scheme, err := signature.NewTokenHMAC(s.Secrets, tol)
	if err != nil {
		return nil, fmt.Errorf("mailgun: secrets: %w", err)
	}
	return &Adapter{scheme: scheme, tolerance: tol, allow: allow}, nil
}

// RejectStatus implements provider.Rejecter: Mailgun retries every status but 200 and 406, so a
// request no retry can fix (bad signature, unparsable body) is answered 406.
func (a *Adapter) RejectStatus() int { return http.StatusNotAcceptable }

// sigBlock is the "signature" object. parent-signature is present for events of a subaccount and
// is computed with the parent account's key over the same timestamp and token.
type sigBlock struct {
	Timestamp json.RawMessage `json:"timestamp"`
	Token     *string         `json:"token"`
	Signature *string         `json:"signature"`
	Parent    *string         `json:"parent-signature"`
}

// Verify checks the signature block in the body. Failures wrap provider.ErrUnauthorized and,
// last, one of the signature package's sentinels, so the innermost error is a short reason that
// echoes nothing from the request.
func (a *Adapter) Verify(r provider.Request) error {
	if !a.allow.Allows(r.RemoteIP) {
		return fmt.Errorf("%s: %w: source address not allowed", Name, provider.ErrUnauthorized)
	}
	verify := func() error { return a.verify(r.Body, r.Now) }
	if isForm(r.Header) {
		verify = func() error { return a.verifyForm(r) }
	}
	if err := verify(); err != nil {
		return fmt.Errorf("mailgun: %w: %w", provider.ErrUnauthorized, err)
	}
	return nil
}

func (a *Adapter) verify(body []byte, now time.Time) error {
	// Only the signature block is decoded; event-data is skipped without being copied.
	var top struct {
		Signature *sigBlock `json:"signature"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			return fmt.Errorf("%w: \"signature\" is not an object of strings", signature.ErrMalformedSignature)
		}
		return fmt.Errorf("%w: body is not a JSON object", signature.ErrMalformedSignature)
	}
	if top.Signature == nil {
		return fmt.Errorf("%w: no \"signature\" object", signature.ErrMissingSignature)
	}
	sb := top.Signature
	ts, ok := timestampText(sb.Timestamp)
	if !ok {
		return fmt.Errorf("%w: timestamp is not unix seconds", signature.ErrMalformedSignature)
	}
	var token string
	if sb.Token != nil {
		token = *sb.Token
	}
	return a.scheme.Verify(ts, token, []*string{sb.Signature, sb.Parent}, now)
}

// Nonce implements provider.NonceBinder: the signature covers the timestamp and the token, not
// event-data, so the token is bound to the event it first signed until the signature expires.
func (a *Adapter) Nonce(r provider.Request) (provider.Nonce, bool) {
	if isForm(r.Header) {
		f, err := readForm(r.Header, r.Body)
		unix, ok := signature.ParseUnix(f.fields.Get("timestamp"))
		if err != nil || !ok || f.fields.Get("token") == "" {
			return provider.Nonce{}, false
		}
		return provider.Nonce{Value: f.fields.Get("token"), Expires: time.Unix(unix, 0).Add(a.tolerance)}, true
	}
	var top struct {
		Signature *sigBlock `json:"signature"`
	}
	if json.Unmarshal(r.Body, &top) != nil || top.Signature == nil || top.Signature.Token == nil {
		return provider.Nonce{}, false
	}
	ts, ok := timestampText(top.Signature.Timestamp)
	if !ok {
		return provider.Nonce{}, false
	}
	unix, _ := signature.ParseUnix(ts)
	return provider.Nonce{Value: *top.Signature.Token, Expires: time.Unix(unix, 0).Add(a.tolerance)}, true
}

// timestampText returns the signed timestamp's text. Mailgun sends it as a JSON string of digits;
// a bare JSON integer is accepted too, and its literal text is what was signed.
func timestampText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	s := string(raw)
	if raw[0] == '"' {
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
	}
	if _, ok := signature.ParseUnix(s); !ok {
		return "", false
	}
	return s, true
}

// Parse turns a verified body into exactly one normalized event.
func (a *Adapter) Parse(r provider.Request) ([]domain.Event, error) {
	if isForm(r.Header) {
		return provider.One(parseInbound(r))
	}
	return provider.One(parse(r.Body))
}
