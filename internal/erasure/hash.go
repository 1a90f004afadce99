// Package erasure is the pure part of erasing an address (GDPR art. 17: `mailhook erase`,
// POST /v1/erasures): which text mentions the address, what replaces it in text and in JSON,
// and the keyed hash that stands in for a suppressed address so that it stays suppressed. It
// does no I/O and imports nothing of mailhook's; internal/store applies it to the rows.
package erasure

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// MinKeyBytes is the shortest hash key accepted: an HMAC-SHA256 key shorter than the hash adds
// nothing to guess for someone who tries addresses against the stored hashes.
const MinKeyBytes = 32

// HashPrefix starts every hashed address. An address has an "@" and this has none, so a hashed
// row can never be taken for an address, and an operator listing suppressions sees which rows
// are erased ones.
const HashPrefix = "erased:hmac-sha256:"

// ErrNoKey is returned (wrapped) when erasure is asked for and no hash key is configured.
var ErrNoKey = errors.New("no erasure hash key is configured")

// ParseKey decodes a hash key: standard base64 (padded or not) of at least MinKeyBytes bytes,
// e.g. `openssl rand -base64 32`. Its errors never quote the key.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if key, err = base64.RawStdEncoding.DecodeString(s); err != nil {
			return nil, errors.New("not base64 (generate one with: openssl rand -base64 32)")
		}
	}
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("%d bytes once decoded, want at least %d (generate one with: openssl rand -base64 32)", len(key), MinKeyBytes)
	}
	return key, nil
}

// Hasher computes the keyed hash kept in place of an erased address. The zero Hasher has no
// key: Configured is false and Hash refuses.
type Hasher struct {
	key []byte
}

// NewHasher returns a Hasher keyed by key (at least MinKeyBytes long).
func NewHasher(key []byte) (Hasher, error) {
	if len(key) < MinKeyBytes {
		return Hasher{}, fmt.Errorf("erasure hash key: %d bytes, want at least %d", len(key), MinKeyBytes)
	}
	return Hasher{key: append([]byte(nil), key...)}, nil
}

// Configured reports whether h has a key.
func (h Hasher) Configured() bool { return len(h.key) > 0 }

// Hash is HashPrefix and the hex HMAC-SHA256 of address under the key: the same address (as
// the caller normalized it) gives the same hash for as long as the key is the same, and without
// the key nobody can tell which address it is, nor check a guess.
func (h Hasher) Hash(address string) (string, error) {
	if !h.Configured() {
		return "", ErrNoKey
	}
	mac := hmac.New(sha256.New, h.key)
	mac.Write([]byte(address))
	return HashPrefix + hex.EncodeToString(mac.Sum(nil)), nil
}

// IsHash reports whether s is a hashed address (HashPrefix), not an address.
func IsHash(s string) bool { return strings.HasPrefix(s, HashPrefix) }
