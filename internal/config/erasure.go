package config

// EnvErasureKey is the variable erasure.hash_key defaults to.
const EnvErasureKey = "MAILHOOK_ERASURE_KEY"

// DevErasureKey is the erasure hash key of deploy/mailhook.dev.yaml: public, like the other
// development values, so anyone can check a guessed address against the hashes it made. Start-up
// warns while it is in use.
const DevErasureKey = "bWFpbGhvb2stZGV2LWVyYXN1cmUta2V5LWxvY2FsLW9ubHkh"

// Erasure configures erasing an address (`mailhook erase`, POST /v1/erasures;
// docs/operations/erasure.md).
type Erasure struct {
	// HashKey keys the HMAC-SHA256 that replaces an erased address in the suppressions (so it
	// stays suppressed) and in the audit rows: base64 of at least 32 random bytes
	// (`openssl rand -base64 32`), kept secret like the other keys. Unset (the default, unless
	// MAILHOOK_ERASURE_KEY is set): erasure is refused, because a hash under no key, or under a
	// made-up default one, can be reversed by hashing guessed addresses. Never change it once
	// an address was erased: a suppression hashed under the old key no longer matches, and the
	// address could be mailed again. internal/erasure parses it (serve.ErasureHasher), and a
	// key it refuses stops start-up.
	HashKey string `yaml:"hash_key"`
}

// UsesDevErasureKey reports whether erasure hashes under the public development key.
func (c Config) UsesDevErasureKey() bool { return c.Erasure.HashKey == DevErasureKey }
