package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Timestamped is the Stripe-style scheme Postscale sends: a header
// "t=<unix>,v1=<hex>[,v1=<hex>…]" over body.
//
// The signed content is "<t>.<body>", HMAC-SHA256 keyed with the bytes of the whole secret string
// (a "whsec_…" secret is not base64-decoded). A request is accepted when any v1 signature
// matches any secret: a sender rotating its secret signs with both, and a receiver rotating its
// configuration holds both. Entries with other schemes (v0=, …) are ignored, but at least one v1
// is required.
type Timestamped struct {
	keys      [][]byte
	tolerance time.Duration
}

// NewTimestamped builds the scheme for secrets. Empty secrets are skipped, since an empty key is
// public knowledge and anyone could produce a matching signature; at least one must remain.
// tolerance bounds |now - t|; zero or less disables the check.
func NewTimestamped(secrets []string, tolerance time.Duration) (*Timestamped, error) {
	t := &Timestamped{tolerance: tolerance}
	for _, s := range secrets {
		if s != "" {
			t.keys = append(t.keys, []byte(s))
		}
	}
	if len(t.keys) == 0 {
		return nil, fmt.Errorf("%w: no non-empty secret configured", ErrInvalidSecret)
	}
	return t, nil
}

// Verify checks header over body at now. Headers longer than MaxHeaderBytes or with more than
// MaxHeaderEntries entries are rejected as malformed before anything is hashed.
func (t *Timestamped) Verify(header string, body []byte, now time.Time) error {
	header = strings.TrimSpace(header)
	if header == "" {
		return ErrMissingSignature
	}
	if len(header) > MaxHeaderBytes {
		return fmt.Errorf("%w: header is %d bytes, limit %d", ErrMalformedSignature, len(header), MaxHeaderBytes)
	}
	if n := strings.Count(header, ",") + 1; n > MaxHeaderEntries {
		return fmt.Errorf("%w: header has %d entries, limit %d", ErrMalformedSignature, n, MaxHeaderEntries)
	}

	var (
		ts    string
		sigs  [MaxHeaderEntries][sha256.Size]byte
		nsigs int
	)
	for rest, i := header, 0; rest != ""; i++ {
		var entry string
		entry, rest, _ = strings.Cut(rest, ",")
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue // tolerate "t=1,,v1=…" and a trailing comma; they carry no meaning
		}
		key, value, ok := strings.Cut(entry, "=")
		if !ok {
			return fmt.Errorf("%w: entry %d is not key=value", ErrMalformedSignature, i)
		}
		switch key {
		case "t":
			// Two timestamps would make it ambiguous which one was signed.
			if ts != "" {
				return fmt.Errorf("%w: more than one timestamp", ErrMalformedSignature)
			}
			if value == "" {
				return fmt.Errorf("%w: empty timestamp", ErrMalformedSignature)
			}
			ts = value
		case "v1":
			if !DecodeHex32(&sigs[nsigs], value) {
				return fmt.Errorf("%w: v1 entry %d is not a %d-byte hex digest", ErrMalformedSignature, i, sha256.Size)
			}
			nsigs++
		}
	}
	if ts == "" {
		return fmt.Errorf("%w: no timestamp", ErrMalformedSignature)
	}
	unix, ok := ParseUnix(ts)
	if !ok {
		return fmt.Errorf("%w: timestamp is not unix seconds", ErrMalformedSignature)
	}
	if nsigs == 0 {
		return fmt.Errorf("%w: no v1 signature", ErrMalformedSignature)
	}
	// Checked before hashing so stale replays cost no HMAC work.
	if signed := time.Unix(unix, 0); !WithinTolerance(signed, now, t.tolerance) {
		return fmt.Errorf("%w: signed at %d, %s from now, tolerance %s",
			ErrTimestampOutOfTolerance, unix, now.Sub(signed).Round(time.Second), t.tolerance)
	}

	var mac [sha256.Size]byte
	for _, key := range t.keys {
		timestampedMAC(&mac, key, ts, body)
		for i := range nsigs {
			if hmac.Equal(mac[:], sigs[i][:]) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %d signature(s) checked against %d secret(s)", ErrNoMatchingSignature, nsigs, len(t.keys))
}

// Sign returns the full header value "t=<unix>,v1=<hex>[,v1=<hex>…]" for body signed at at, one
// v1 entry per secret as a sender rotating its secret sends. It is the sender side of Verify,
// used by the simulator.
func (t *Timestamped) Sign(at time.Time, body []byte) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=" + ts)
	var mac [sha256.Size]byte
	for _, key := range t.keys {
		timestampedMAC(&mac, key, ts, body)
		b.WriteString(",v1=" + hex.EncodeToString(mac[:]))
	}
	return b.String()
}

func timestampedMAC(dst *[sha256.Size]byte, key []byte, ts string, body []byte) {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	h.Sum(dst[:0])
}

// DecodeHex32 decodes exactly 64 hex digits into dst without allocating.
func DecodeHex32(dst *[sha256.Size]byte, s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := range dst {
		hi, ok1 := fromHex(s[2*i])
		lo, ok2 := fromHex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
