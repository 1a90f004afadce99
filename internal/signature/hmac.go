package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
	"time"
)

// HMACOptions configure an HMAC scheme. Header and TimestampHeader only name the headers in
// failure messages; the caller reads their values.
type HMACOptions struct {
	// Secrets are the keys, used as the raw bytes of each string.
	Secrets []string
	// SHA512 selects HMAC-SHA512 instead of HMAC-SHA256.
	SHA512 bool
	// Base64 selects base64 (standard or URL-safe, padded or not) instead of hex.
	Base64 bool
	// Prefix is stripped from the header value before decoding, e.g. "sha256=".
	Prefix string
	Header string
	// TimestampHeader, when set, means the HMAC covers "<timestamp><Separator><body>" and the
	// timestamp must be within Tolerance of now.
	TimestampHeader string
	Separator       string
	Tolerance       time.Duration
}

// HMAC is a plain HMAC of the body (or of a timestamp, a separator and the body) in one header,
// the scheme of the configurable "hmac" provider. A signature made with any key is accepted.
type HMAC struct {
	keys            [][]byte
	newHash         func() hash.Hash
	size            int
	base64          bool
	prefix          string
	header          string
	timestampHeader string
	separator       string
	tolerance       time.Duration
}

// NewHMAC builds the scheme; it refuses an empty key, since an empty key is public knowledge.
func NewHMAC(o HMACOptions) (*HMAC, error) {
	if len(o.Secrets) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrInvalidSecret)
	}
	h := &HMAC{
		newHash: sha256.New, size: sha256.Size, base64: o.Base64, prefix: o.Prefix, header: o.Header,
		timestampHeader: o.TimestampHeader, separator: o.Separator, tolerance: o.Tolerance,
	}
	if o.SHA512 {
		h.newHash, h.size = sha512.New, sha512.Size
	}
	for i, s := range o.Secrets {
		if s == "" {
			return nil, fmt.Errorf("%w: key %d is empty", ErrInvalidSecret, i)
		}
		h.keys = append(h.keys, []byte(s))
	}
	return h, nil
}

// Verify checks the signature header value over body; timestamp is the timestamp header's value
// and is ignored unless the scheme signs one.
func (h *HMAC) Verify(sig, timestamp string, body []byte, now time.Time) error {
	got, err := h.decode(sig)
	if err != nil {
		return err
	}
	var stamp string
	if h.timestampHeader != "" {
		stamp = strings.TrimSpace(timestamp)
		if stamp == "" {
			return fmt.Errorf("%w: no %s", ErrMissingSignature, h.timestampHeader)
		}
		unix, ok := ParseUnix(stamp)
		if !ok {
			return fmt.Errorf("%w: %s is not unix seconds", ErrMalformedSignature, h.timestampHeader)
		}
		if d := now.Sub(time.Unix(unix, 0)); d > h.tolerance || d < -h.tolerance {
			return fmt.Errorf("%w: signed %s from now, tolerance %s", ErrTimestampOutOfTolerance, d.Round(time.Second), h.tolerance)
		}
	}
	sum := make([]byte, 0, h.size)
	for _, key := range h.keys {
		mac := hmac.New(h.newHash, key)
		if stamp != "" {
			mac.Write([]byte(stamp))
			mac.Write([]byte(h.separator))
		}
		mac.Write(body)
		if hmac.Equal(mac.Sum(sum[:0]), got) {
			return nil
		}
	}
	return fmt.Errorf("%w: %d key(s) checked", ErrNoMatchingSignature, len(h.keys))
}

// decode strips the prefix and decodes the digest.
func (h *HMAC) decode(v string) ([]byte, error) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return nil, fmt.Errorf("%w: no %s", ErrMissingSignature, h.header)
	case len(v) > MaxHeaderBytes:
		return nil, fmt.Errorf("%w: header is %d bytes, limit %d", ErrMalformedSignature, len(v), MaxHeaderBytes)
	}
	if h.prefix != "" {
		if !strings.HasPrefix(v, h.prefix) {
			return nil, fmt.Errorf("%w: no %q prefix", ErrMalformedSignature, h.prefix)
		}
		v = v[len(h.prefix):]
	}
	var (
		got []byte
		err error
	)
	encoding := "hex"
	if h.base64 {
		encoding = "base64"
		v = strings.TrimRight(v, "=")
		v = strings.NewReplacer("-", "+", "_", "/").Replace(v)
		got, err = base64.RawStdEncoding.DecodeString(v)
	} else {
		got, err = hex.DecodeString(v)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: not %s", ErrMalformedSignature, encoding)
	case len(got) != h.size:
		return nil, fmt.Errorf("%w: %d-byte digest, want %d", ErrMalformedSignature, len(got), h.size)
	}
	return got, nil
}
