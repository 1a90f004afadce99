package provider

import (
	"crypto/sha256"
	"encoding/hex"
)

// RecipientTag stands for a recipient in an event id, which must hold no address: the id is the
// dedupe key, the Temporal workflow ID (which no codec encrypts and no erasure reaches) and a
// field of log lines and spans. It is the first 16 hex digits of SHA-256 over scope, a NUL and
// the address as the provider sent it. scope (the provider's id of the message or notification)
// makes the same address tag differently in every message, so a tag names no one across
// messages; whoever holds the message id and guesses the address can still confirm the guess,
// as with any unkeyed hash (docs/operations/personal-data.md, "Ids without addresses"). 64 bits keep the
// recipients of one message apart.
func RecipientTag(scope, address string) string {
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(address))
	return hex.EncodeToString(h.Sum(nil)[:8])
}
