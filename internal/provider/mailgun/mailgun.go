// Package mailgun is the provider adapter for Mailgun webhooks (the JSON webhooks Mailgun has sent
// since 2018; the form-encoded "legacy" webhooks, shut down in 2023, are not supported).
//
// Mailgun signs inside the body: {"signature":{"timestamp","token","signature"},"event-data":{…}}
// where signature = hex(HMAC-SHA256(webhook signing key, timestamp + token)). The signature does
// not cover event-data. One event per request. See docs/providers/mailgun.md.
package mailgun

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
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

// Limits on the signature block. Mailgun tokens are 50 characters; the cap keeps a hostile token
// from costing more HMAC work than a legitimate one.
const (
	maxTokenLen     = 256
	maxTimestampLen = 18 // 18 digits cannot overflow int64
)

func init() {
	provider.Register(Name, New)
}

// Adapter verifies and parses Mailgun webhooks for one endpoint.
type Adapter struct {
	keys      [][]byte
	tolerance time.Duration
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
	if len(s.Secrets) == 0 {
		return nil, errors.New("mailgun: secrets: at least one webhook signing key is required")
	}
	keys := make([][]byte, 0, len(s.Secrets))
	for i, sec := range s.Secrets {
		// An empty key is public knowledge: anyone could produce a matching signature.
		if strings.TrimSpace(sec) == "" {
			return nil, fmt.Errorf("mailgun: secrets[%d] is empty", i)
		}
		keys = append(keys, []byte(sec))
	}
	if s.Tolerance < 0 {
		return nil, fmt.Errorf("mailgun: tolerance %s is negative", s.Tolerance)
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
	if err := a.verify(r.Body, r.Now); err != nil {
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
	unix, _ := signature.ParseUnix(ts)
	if sb.Token == nil || *sb.Token == "" {
		return fmt.Errorf("%w: no token", signature.ErrMalformedSignature)
	}
	if len(*sb.Token) > maxTokenLen {
		return fmt.Errorf("%w: token is %d bytes, limit %d", signature.ErrMalformedSignature, len(*sb.Token), maxTokenLen)
	}
	var (
		sigs [2][sha256.Size]byte
		n    int
	)
	for _, s := range []*string{sb.Signature, sb.Parent} {
		if s != nil && signature.DecodeHex32(&sigs[n], *s) {
			n++
		}
	}
	if n == 0 {
		if sb.Signature == nil || *sb.Signature == "" {
			return fmt.Errorf("%w: no signature in the \"signature\" object", signature.ErrMissingSignature)
		}
		return fmt.Errorf("%w: signature is not a %d-byte hex digest", signature.ErrMalformedSignature, sha256.Size)
	}
	// Checked before hashing so stale replays cost no HMAC work.
	if signed := time.Unix(unix, 0); !signature.WithinTolerance(signed, now, a.tolerance) {
		return fmt.Errorf("%w: signed at %d, %s from now, tolerance %s",
			signature.ErrTimestampOutOfTolerance, unix, now.Sub(signed).Round(time.Second), a.tolerance)
	}
	var mac [sha256.Size]byte
	for _, key := range a.keys {
		sum(&mac, key, ts, *sb.Token)
		for i := range n {
			if hmac.Equal(mac[:], sigs[i][:]) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %d signature(s) checked against %d key(s)", signature.ErrNoMatchingSignature, n, len(a.keys))
}

// Nonce implements provider.NonceBinder: the signature covers the timestamp and the token, not
// event-data, so the token is bound to the event it first signed until the signature expires.
func (a *Adapter) Nonce(r provider.Request) (provider.Nonce, bool) {
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
	ev, err := parse(r.Body)
	if err != nil {
		return nil, err
	}
	return []domain.Event{ev}, nil
}

func sum(dst *[sha256.Size]byte, key []byte, timestamp, token string) {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(timestamp))
	h.Write([]byte(token))
	h.Sum(dst[:0])
}

// Sign returns the signature Mailgun puts in signature.signature for timestamp and token:
// hex(HMAC-SHA256(key, timestamp + token)). It is the sender side of Verify, for tests and the
// simulator.
func Sign(key, timestamp, token string) string {
	var mac [sha256.Size]byte
	sum(&mac, []byte(key), timestamp, token)
	return hex.EncodeToString(mac[:])
}

// SignedBody builds a complete webhook body as Mailgun would send it: eventData (one JSON object)
// under "event-data" and a signature block signed with key at timestamp with token. It panics if
// eventData is not valid JSON.
func SignedBody(key, timestamp, token string, eventData []byte) []byte {
	if !json.Valid(eventData) {
		panic("mailgun: SignedBody: event data is not valid JSON")
	}
	sig, err := json.Marshal(map[string]string{"timestamp": timestamp, "token": token, "signature": Sign(key, timestamp, token)})
	if err != nil {
		panic(err)
	}
	var b bytes.Buffer
	b.WriteString(`{"signature":`)
	b.Write(sig)
	b.WriteString(`,"event-data":`)
	b.Write(eventData)
	b.WriteString("}")
	return b.Bytes()
}
