// Package basicauth checks HTTP Basic credentials that a provider sends because they are part of
// the webhook URL (https://user:password@host/webhooks/…): Postmark's only proof, and SendGrid
// Inbound Parse's when no security policy signs it.
package basicauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Verification failures. Their messages are short and free of request data: the HTTP layer
// returns the innermost error as the reason of a 401.
var (
	// ErrMissingCredentials means the request carried no usable Basic credentials.
	ErrMissingCredentials = errors.New("missing credentials")
	// ErrWrongCredentials means the credentials match none of the configured pairs.
	ErrWrongCredentials = errors.New("wrong credentials")
)

// credential is one configured user:password pair, kept as digests so every comparison is over
// 32 bytes whatever the lengths involved (subtle.ConstantTimeCompare returns early on a length
// mismatch, which would leak the configured lengths).
type credential struct {
	user, pass [sha256.Size]byte
}

// Set is the pairs an endpoint accepts (several while rotating).
type Set []credential

// IsPair reports whether secret is written as a "user:password" pair (it has a colon).
func IsPair(secret string) bool { return strings.Contains(secret, ":") }

// Add parses secret, secrets[i] of adapter's endpoint, as "user:password". Errors name the
// index, never the secret.
func (s *Set) Add(adapter string, i int, secret string) error {
	user, pass, ok := strings.Cut(secret, ":")
	switch {
	case !ok:
		return fmt.Errorf(`%s: secrets[%d] is not "user:password" (no colon)`, adapter, i)
	case user == "":
		return fmt.Errorf(`%s: secrets[%d] has an empty user`, adapter, i)
	case pass == "":
		return fmt.Errorf(`%s: secrets[%d] has an empty password`, adapter, i)
	}
	*s = append(*s, credential{user: sha256.Sum256([]byte(user)), pass: sha256.Sum256([]byte(pass))})
	return nil
}

// Verify checks h's Basic credentials against every pair, in constant time on both the user and
// the password, without stopping at the first match or at a user mismatch, so the time taken
// says nothing about which part was wrong.
func (s Set) Verify(h http.Header) error {
	user, pass, ok := (&http.Request{Header: h}).BasicAuth()
	if !ok {
		return ErrMissingCredentials
	}
	u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	match := 0
	for _, c := range s {
		match |= subtle.ConstantTimeCompare(u[:], c.user[:]) & subtle.ConstantTimeCompare(p[:], c.pass[:])
	}
	if match != 1 {
		return ErrWrongCredentials
	}
	return nil
}
