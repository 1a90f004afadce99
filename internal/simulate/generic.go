package simulate

import (
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/signature"
)

// The generic providers (hmac, standard-webhooks) have no payloads of their own: the sender's
// JSON is whatever the endpoint's generic: block maps. The simulator writes each event from
// that block (its type, message id, recipient, time and bounce fields at their paths, with the
// types status_map maps to accepted, delivered and bounced) and signs it as the block says
// (hmac) or as Standard Webhooks does. docs/providers/hmac.md and standard-webhooks.md.

// diagnostic is the remote server's reply the simulated bounce carries: a hard bounce.
const diagnostic = "550 5.1.1 The email account that you tried to reach does not exist."

// genericSpeaker builds the speaker of a hmac or standard-webhooks endpoint from its generic
// settings; errors name the setting simulate cannot do without.
func genericSpeaker(provider string, g *config.Generic) (speaker, error) {
	if g == nil {
		return speaker{}, fmt.Errorf("%s: simulate writes this provider's payloads from the endpoint's generic: block, and there is none: run it against an endpoint of the config", provider)
	}
	typeOf := func(status string) string {
		var types []string
		for typ, to := range g.StatusMap {
			if strings.EqualFold(strings.TrimSpace(to), status) {
				types = append(types, typ)
			}
		}
		slices.Sort(types)
		if len(types) == 0 {
			return ""
		}
		return types[0]
	}
	sentType, deliveredType, bouncedType := typeOf("accepted"), typeOf("delivered"), typeOf("bounced")
	if deliveredType == "" || bouncedType == "" {
		return speaker{}, fmt.Errorf("%s: simulate sends a delivery and a bounce: generic.status_map must map a type to delivered and one to bounced", provider)
	}
	typeField := g.TypeField
	if strings.TrimSpace(typeField) == "" {
		typeField = "type" // fieldmap.DefaultTypeField: the simulator writes, it does not parse
	}
	bounceType := "hard"
	if len(g.BounceTypeMap) > 0 {
		bounceType = ""
		for v, t := range g.BounceTypeMap {
			if strings.EqualFold(strings.TrimSpace(t), "hard") && (bounceType == "" || v < bounceType) {
				bounceType = v
			}
		}
	}
	eventIDInBody := strings.TrimSpace(g.EventIDField) != "" && provider == "hmac"

	fields := func(id, eventID, typ string, at time.Time, bounced bool) []field {
		fs := []field{
			{"type_field", typeField, typ},
			{"message_id_field", g.MessageIDField, id},
			{"recipient_field", g.RecipientField, Recipient},
			{"occurred_at_field", g.OccurredAtField, at.UTC().Format(time.RFC3339Nano)},
		}
		if eventIDInBody {
			fs = append(fs, field{"event_id_field", g.EventIDField, eventID})
		}
		if bounced {
			fs = append(fs, field{"bounce_type_field", g.BounceTypeField, bounceType}, field{"diagnostic_field", g.DiagnosticField, diagnostic})
		}
		return fs
	}
	// The bounce carries every mapped field: if its body can be written, every event's can.
	if _, err := writeFields(fields("id", "event-id", bouncedType, time.Now(), true)); err != nil {
		return speaker{}, fmt.Errorf("%s: %w", provider, err)
	}

	sp := speaker{messageID: func(id string) string { return id }, events: 2}
	sp.steps = func(id string, base time.Time) []Step {
		ev := func(kind, typ string, at time.Time, bounced bool) Step {
			eventID := id + "-" + kind
			if provider == "standard-webhooks" {
				eventID = "msg_" + id + "_" + kind
			}
			body, _ := writeFields(fields(id, eventID, typ, at, bounced)) // checked above
			return Step{ID: eventID, Body: body}
		}
		delivered := ev("delivered", deliveredType, base.Add(2*time.Second), false)
		bounced := ev("bounced", bouncedType, base.Add(10*time.Minute), true)
		if sentType == "" {
			// Nothing maps to accepted: the bounce first, then the delivery, then its retry.
			return []Step{
				named("bounced (a delayed DSN)", bounced),
				named("delivered (arrives after the bounce)", delivered),
				named("delivered (provider retry: duplicate)", delivered),
			}
		}
		return lifecycle(ev("sent", sentType, base, false), delivered, bounced)
	}
	if sentType != "" {
		sp.events = 3
	}
	switch provider {
	case "standard-webhooks":
		sp.sign = signStandardWebhooks
	case "hmac":
		s, err := newHMACSigner(g)
		if err != nil {
			return speaker{}, err
		}
		sp.sign = s.sign
	default:
		return speaker{}, fmt.Errorf("%s has no generic: block", provider)
	}
	return sp, nil
}

// signStandardWebhooks signs "<id>.<timestamp>.<body>" with the whsec_ secret, in the
// webhook-* headers Standard Webhooks senders use (Resend's speaker sends the svix-* ones).
func signStandardWebhooks(req *http.Request, st Step, secret string, _ *ecdsa.PrivateKey, now time.Time) error {
	s, err := signature.NewStandard(secret, 0)
	if err != nil {
		return fmt.Errorf("standard-webhooks secret (whsec_…): %w", err)
	}
	sig, err := s.Sign(st.ID, now, st.Body)
	if err != nil {
		return err
	}
	req.Header.Set(signature.HeaderWebhookID, st.ID)
	req.Header.Set(signature.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(signature.HeaderWebhookSignature, sig)
	return nil
}

// hmacSigner signs as an hmac endpoint's generic: block says: HMAC-SHA256 or -SHA512 of the
// body (or of the timestamp, the separator and the body), hex or base64, after the prefix.
type hmacSigner struct {
	g       *config.Generic
	newHash func() hash.Hash
	base64  bool
	stamped bool
}

func newHMACSigner(g *config.Generic) (hmacSigner, error) {
	s := hmacSigner{g: g, newHash: sha256.New}
	if strings.TrimSpace(g.SignatureHeader) == "" {
		return s, errors.New("hmac: generic.signature_header is required")
	}
	switch strings.ToLower(strings.TrimSpace(g.Algorithm)) {
	case "", "sha256":
	case "sha512":
		s.newHash = sha512.New
	default:
		return s, fmt.Errorf("hmac: generic.algorithm %q is not sha256 or sha512", g.Algorithm)
	}
	switch strings.ToLower(strings.TrimSpace(g.Encoding)) {
	case "", "hex":
	case "base64":
		s.base64 = true
	default:
		return s, fmt.Errorf("hmac: generic.encoding %q is not hex or base64", g.Encoding)
	}
	switch strings.ToLower(strings.TrimSpace(g.Signed)) {
	case "", "body":
	case "timestamp_body":
		s.stamped = true
		if strings.TrimSpace(g.TimestampHeader) == "" {
			return s, errors.New("hmac: generic.timestamp_header is required with generic.signed: timestamp_body")
		}
	default:
		return s, fmt.Errorf("hmac: generic.signed %q is not body or timestamp_body", g.Signed)
	}
	return s, nil
}

func (s hmacSigner) sign(req *http.Request, st Step, secret string, _ *ecdsa.PrivateKey, now time.Time) error {
	if secret == "" {
		return errors.New("hmac: no signing key")
	}
	m := hmac.New(s.newHash, []byte(secret))
	if s.stamped {
		ts := strconv.FormatInt(now.Unix(), 10)
		m.Write([]byte(ts))
		m.Write([]byte(s.g.Separator))
		req.Header.Set(strings.TrimSpace(s.g.TimestampHeader), ts)
	}
	m.Write(st.Body)
	sig := hex.EncodeToString(m.Sum(nil))
	if s.base64 {
		sig = base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	req.Header.Set(strings.TrimSpace(s.g.SignatureHeader), s.g.SignaturePrefix+sig)
	if h := strings.TrimSpace(s.g.EventIDHeader); h != "" {
		req.Header.Set(h, st.ID)
	}
	return nil
}

// field is one value the simulated body carries at an endpoint's configured path.
type field struct{ key, path, value string }

// writeFields builds the JSON object holding each value at its dotted path; a segment of digits
// under a new or array parent makes an array, as fieldmap.Path reads it. Unconfigured (empty)
// paths are skipped; two fields at one path, or one inside the other, are an error naming them.
func writeFields(fields []field) ([]byte, error) {
	var root any = map[string]any{}
	for _, f := range fields {
		p := strings.TrimSpace(f.path)
		if p == "" {
			continue
		}
		var err error
		if root, err = put(root, strings.Split(p, "."), f.value); err != nil {
			return nil, fmt.Errorf("generic.%s %q: %w", f.key, p, err)
		}
	}
	return json.Marshal(root)
}

func put(into any, segs []string, v string) (any, error) {
	if len(segs) == 0 {
		if into != nil {
			return into, errors.New("another mapped field is already there")
		}
		return v, nil
	}
	seg := segs[0]
	if seg == "" {
		return into, errors.New("empty path segment")
	}
	if _, isMap := into.(map[string]any); !isMap {
		if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < 100 && digitsOnly(seg) {
			arr, ok := into.([]any)
			if into != nil && !ok {
				return into, errors.New("inside another mapped field")
			}
			for len(arr) <= i {
				arr = append(arr, nil)
			}
			var err error
			arr[i], err = put(arr[i], segs[1:], v)
			return arr, err
		}
	}
	m, ok := into.(map[string]any)
	if into != nil && !ok {
		return into, errors.New("inside another mapped field")
	}
	if m == nil {
		m = map[string]any{}
	}
	child, err := put(m[seg], segs[1:], v)
	m[seg] = child
	return m, err
}

func digitsOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
