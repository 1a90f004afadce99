package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks header names (https://www.standardwebhooks.com/).
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

const standardSecretPrefix = "whsec_"

// Standard is the Standard Webhooks scheme for one secret: "v1,<base64 HMAC-SHA256>" over
// "<id>.<timestamp>.<body>", keyed with the base64-decoded secret. A receiver rotating its
// secret holds one Standard per secret.
type Standard struct {
	key       []byte
	tolerance time.Duration
}

// NewStandard decodes secret (the base64 part after the "whsec_" prefix, or the whole string
// when it has no prefix) once. tolerance bounds |now - timestamp| in Verify; zero or less
// disables the check.
func NewStandard(secret string, tolerance time.Duration) (*Standard, error) {
	enc := strings.TrimPrefix(secret, standardSecretPrefix)
	if enc == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidSecret)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64: %w", ErrInvalidSecret, err)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: decodes to an empty key", ErrInvalidSecret)
	}
	return &Standard{key: key, tolerance: tolerance}, nil
}

// KeyLength is how many bytes the secret decoded to.
func (s *Standard) KeyLength() int { return len(s.key) }

// Sign returns the webhook-signature header value "v1,<base64>" for a message with the given id
// and timestamp. It fails only when the id is empty.
func (s *Standard) Sign(id string, ts time.Time, body []byte) (string, error) {
	if id == "" {
		return "", fmt.Errorf("sign standard webhook: empty message id")
	}
	mac := standardMAC(s.key, id, strconv.FormatInt(ts.Unix(), 10), body)
	return "v1," + base64.StdEncoding.EncodeToString(mac[:]), nil
}

// Verify verifies a Standard Webhooks request from its three header values. The signature
// header may carry several space-separated "<version>,<base64>" entries (a sender rotating its
// secret sends one per secret); the request is accepted when any v1 entry matches. Entries of
// other versions (such as the asymmetric v1a) are skipped.
func (s *Standard) Verify(id, timestampHeader, signatureHeader string, body []byte, now time.Time) error {
	timestampHeader = strings.TrimSpace(timestampHeader)
	signatureHeader = strings.TrimSpace(signatureHeader)
	switch {
	case id == "":
		return fmt.Errorf("%w: no %s", ErrMissingSignature, HeaderWebhookID)
	case timestampHeader == "":
		return fmt.Errorf("%w: no %s", ErrMissingSignature, HeaderWebhookTimestamp)
	case signatureHeader == "":
		return fmt.Errorf("%w: no %s", ErrMissingSignature, HeaderWebhookSignature)
	}
	if len(signatureHeader) > MaxHeaderBytes {
		return fmt.Errorf("%w: header is %d bytes, limit %d", ErrMalformedSignature, len(signatureHeader), MaxHeaderBytes)
	}
	entries := strings.Fields(signatureHeader)
	if len(entries) > MaxHeaderEntries {
		return fmt.Errorf("%w: header has %d entries, limit %d", ErrMalformedSignature, len(entries), MaxHeaderEntries)
	}
	unix, ok := ParseUnix(timestampHeader)
	if !ok {
		return fmt.Errorf("%w: %s is not unix seconds", ErrMalformedSignature, HeaderWebhookTimestamp)
	}
	if signed := time.Unix(unix, 0); !WithinTolerance(signed, now, s.tolerance) {
		return fmt.Errorf("%w: signed at %d, %s from now, tolerance %s",
			ErrTimestampOutOfTolerance, unix, now.Sub(signed).Round(time.Second), s.tolerance)
	}

	mac := standardMAC(s.key, id, timestampHeader, body)
	// Sized for DecodedLen of a padded 32-byte digest, which rounds up to 33.
	var got [sha256.Size + 1]byte
	v1 := 0
	for _, e := range entries {
		version, sig, ok := strings.Cut(e, ",")
		if !ok {
			return fmt.Errorf("%w: entry is not <version>,<signature>", ErrMalformedSignature)
		}
		if version != "v1" {
			continue
		}
		v1++
		// A wrong-length or non-base64 entry can never match; it is skipped rather than
		// failing the whole header so one bad entry cannot mask a good one.
		if len(sig) != base64.StdEncoding.EncodedLen(sha256.Size) {
			continue
		}
		n, err := base64.StdEncoding.Decode(got[:], []byte(sig))
		if err != nil || n != sha256.Size {
			continue
		}
		if hmac.Equal(mac[:], got[:n]) {
			return nil
		}
	}
	if v1 == 0 {
		return fmt.Errorf("%w: no v1 signature", ErrNoMatchingSignature)
	}
	return fmt.Errorf("%w: %d v1 signature(s) checked", ErrNoMatchingSignature, v1)
}

func standardMAC(key []byte, id, ts string, body []byte) [sha256.Size]byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
