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

// VerifyTimestamped verifies a Stripe-style header "t=<unix>,v1=<hex>[,v1=<hex>…]" over body.
//
// The signed content is "<t>.<body>", HMAC-SHA256 keyed with the bytes of the whole secret string
// (a "whsec_…" secret is not base64-decoded). The request is accepted when any v1 signature
// matches any secret: a sender rotating its secret signs with both, and a receiver rotating its
// configuration holds both. Entries with other schemes (v0=, …) are ignored, but at least one v1
// is required. tolerance bounds |now - t|; zero or less disables the check.
//
// Headers longer than MaxHeaderBytes or with more than MaxHeaderEntries entries are rejected as
// malformed before anything is hashed.
func VerifyTimestamped(header string, body []byte, secrets []string, tolerance time.Duration, now time.Time) error {
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
	if signed := time.Unix(unix, 0); !WithinTolerance(signed, now, tolerance) {
		return fmt.Errorf("%w: signed at %d, %s from now, tolerance %s",
			ErrTimestampOutOfTolerance, unix, now.Sub(signed).Round(time.Second), tolerance)
	}

	usable := 0
	var mac [sha256.Size]byte
	for _, secret := range secrets {
		// An empty key is public knowledge: anyone could produce a matching signature.
		if secret == "" {
			continue
		}
		usable++
		timestampedMAC(&mac, secret, ts, body)
		for i := range nsigs {
			if hmac.Equal(mac[:], sigs[i][:]) {
				return nil
			}
		}
	}
	if usable == 0 {
		return fmt.Errorf("%w: no non-empty secret configured", ErrInvalidSecret)
	}
	return fmt.Errorf("%w: %d signature(s) checked against %d secret(s)", ErrNoMatchingSignature, nsigs, usable)
}

// SignTimestamped returns the full header value "t=<unix>,v1=<hex>" for body signed at t. It is
// the sender side of VerifyTimestamped, used by the simulator and tests.
func SignTimestamped(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var mac [sha256.Size]byte
	timestampedMAC(&mac, secret, ts, body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac[:])
}

func timestampedMAC(dst *[sha256.Size]byte, secret, ts string, body []byte) {
	h := hmac.New(sha256.New, []byte(secret))
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
