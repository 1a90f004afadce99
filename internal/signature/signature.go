// Package signature signs and verifies webhook signatures. It is pure (no I/O, no clock): every
// function takes the current time as an argument so tests and workflows stay deterministic.
//
// Each scheme is a type built once from its secrets or keys (decoded in the constructor) whose
// Verify runs per request:
//   - Timestamped: the Stripe-style timestamped HMAC that Postscale sends;
//   - Standard: Standard Webhooks, which mailhook uses for its own outbound notifications and
//     which Svix-based providers (Resend) send;
//   - ECDSA: SendGrid's Signed Event Webhook;
//   - TokenHMAC: Mailgun's HMAC of a timestamp and a token;
//   - HMAC: a configurable HMAC of the body, with or without a timestamp (provider "hmac").
package signature

import (
	"errors"
	"time"
)

// The sentinel messages are short and free of request data on purpose: handlers may return them
// verbatim as the JSON reason of a 401 without echoing attacker-controlled input.
var (
	// ErrMissingSignature means the request carried no signature header at all.
	ErrMissingSignature = errors.New("missing signature")
	// ErrMalformedSignature means the signature header could not be parsed, or was larger than
	// a legitimate sender would ever produce.
	ErrMalformedSignature = errors.New("malformed signature")
	// ErrTimestampOutOfTolerance means the signed timestamp is too far from now, in either
	// direction; it is how replays of captured requests are refused.
	ErrTimestampOutOfTolerance = errors.New("timestamp outside tolerance")
	// ErrNoMatchingSignature means no signature in the header matched any configured secret.
	ErrNoMatchingSignature = errors.New("no matching signature")
	// ErrInvalidSecret means a configured secret cannot be used as a key. It is a configuration
	// problem, not a property of the request.
	ErrInvalidSecret = errors.New("invalid signing secret")
)

// Limits on a signature header. A legitimate header holds a timestamp and one or two signatures;
// the caps keep a hostile header from making the verifier parse or hash without bound.
const (
	MaxHeaderBytes   = 8 << 10
	MaxHeaderEntries = 64
)

// WithinTolerance reports whether signed is no further than tolerance from now. It works on
// time.Duration, whose Sub saturates, so absurd timestamps cannot overflow into "accepted".
func WithinTolerance(signed, now time.Time, tolerance time.Duration) bool {
	if tolerance <= 0 {
		return true
	}
	d := now.Sub(signed)
	return d <= tolerance && d >= -tolerance
}

// ParseUnix parses a decimal unix-seconds timestamp. Unlike strconv.ParseInt it refuses signs,
// spaces and empty strings: the timestamp is part of the signed content, so only the canonical
// form a sender produces is accepted.
func ParseUnix(s string) (int64, bool) {
	if s == "" || len(s) > 18 { // 18 digits cannot overflow int64
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
