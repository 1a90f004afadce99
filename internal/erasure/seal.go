package erasure

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// sealInfo names the key Seal derives from the hash key: one key per purpose, so a sealed
// address and a hash never share one.
const sealInfo = "mailhook erasure job address v1"

// Seal encrypts an address under a key derived from the hash key (HKDF-SHA256, AES-256-GCM,
// authenticated with aad), for an erasure job to keep it while it runs and resume after a
// restart; the job drops it when it ends. Without the hash key nobody can read it.
func (h Hasher) Seal(address string, aad []byte) ([]byte, error) {
	aead, err := h.aead()
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return aead.Seal(nonce, nonce, []byte(address), aad), nil
}

// Open decrypts what Seal made with the same key and aad.
func (h Hasher) Open(sealed, aad []byte) (string, error) {
	aead, err := h.aead()
	if err != nil {
		return "", err
	}
	if len(sealed) < aead.NonceSize() {
		return "", errors.New("open: too short")
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], aad)
	if err != nil {
		// A changed hash key, or a row copied between jobs.
		return "", errors.New("open: not sealed under this key for this job")
	}
	return string(plain), nil
}

func (h Hasher) aead() (cipher.AEAD, error) {
	if !h.Configured() {
		return nil, ErrNoKey
	}
	key, err := hkdf.Key(sha256.New, h.key, nil, sealInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
