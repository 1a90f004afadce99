package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"
)

// MaxTokenLen caps a TokenHMAC token. Mailgun tokens are 50 characters; the cap keeps a hostile
// token from costing more HMAC work than a legitimate one.
const MaxTokenLen = 256

// TokenHMAC is Mailgun's scheme: hex(HMAC-SHA256(signing key, timestamp + token)), sent inside
// the body. It signs a timestamp and a single-use token, not the event. A request is accepted
// when any signature matches any key (several during a rotation, or a parent account's key
// beside a subaccount's).
type TokenHMAC struct {
	keys      [][]byte
	tolerance time.Duration
}

// NewTokenHMAC builds the scheme for keys, used as the bytes of each string; a blank key is
// refused because an empty key is public knowledge. tolerance bounds |now - timestamp|; zero or
// less disables the check.
func NewTokenHMAC(keys []string, tolerance time.Duration) (*TokenHMAC, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no signing key", ErrInvalidSecret)
	}
	t := &TokenHMAC{tolerance: tolerance}
	for i, k := range keys {
		if strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("%w: key %d is empty", ErrInvalidSecret, i)
		}
		t.keys = append(t.keys, []byte(k))
	}
	return t, nil
}

// Verify checks signatures (hex digests; a sender may send one per key it holds, nil entries
// are absent ones) over timestamp and token at now.
func (t *TokenHMAC) Verify(timestamp, token string, signatures []*string, now time.Time) error {
	unix, ok := ParseUnix(timestamp)
	if !ok {
		return fmt.Errorf("%w: timestamp is not unix seconds", ErrMalformedSignature)
	}
	if token == "" {
		return fmt.Errorf("%w: no token", ErrMalformedSignature)
	}
	if len(token) > MaxTokenLen {
		return fmt.Errorf("%w: token is %d bytes, limit %d", ErrMalformedSignature, len(token), MaxTokenLen)
	}
	if len(signatures) > 2 {
		return fmt.Errorf("%w: %d signatures, limit 2", ErrMalformedSignature, len(signatures))
	}
	var (
		sigs [2][sha256.Size]byte
		n    int
	)
	for _, s := range signatures {
		if s != nil && DecodeHex32(&sigs[n], *s) {
			n++
		}
	}
	if n == 0 {
		if len(signatures) == 0 || signatures[0] == nil || *signatures[0] == "" {
			return fmt.Errorf("%w: no signature in the \"signature\" object", ErrMissingSignature)
		}
		return fmt.Errorf("%w: signature is not a %d-byte hex digest", ErrMalformedSignature, sha256.Size)
	}
	// Checked before hashing so stale replays cost no HMAC work.
	if signed := time.Unix(unix, 0); !WithinTolerance(signed, now, t.tolerance) {
		return fmt.Errorf("%w: signed at %d, %s from now, tolerance %s",
			ErrTimestampOutOfTolerance, unix, now.Sub(signed).Round(time.Second), t.tolerance)
	}
	var mac [sha256.Size]byte
	for _, key := range t.keys {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(timestamp))
		h.Write([]byte(token))
		h.Sum(mac[:0])
		for i := range n {
			if hmac.Equal(mac[:], sigs[i][:]) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %d signature(s) checked against %d key(s)", ErrNoMatchingSignature, n, len(t.keys))
}
