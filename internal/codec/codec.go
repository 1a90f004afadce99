// Package codec encrypts Temporal payloads (workflow and activity inputs and results, memos,
// summaries) with AES-256-GCM before they leave the process, so the personal data they carry
// (addresses, inbound mail bodies) is ciphertext at rest in Temporal.
//
// An encrypted payload has metadata "encoding: binary/encrypted" and "encryption-key-id: <id>";
// its data is a random 12-byte nonce followed by the GCM sealing of the original payload
// (metadata and data, protobuf-encoded), with the key id as additional authenticated data.
// Encode uses one key (encrypt_with); Decode uses whichever configured key the payload names,
// so keys rotate by adding a new id, switching encrypt_with to it, and keeping the old key for as
// long as histories encrypted with it are kept. Payloads that are not encrypted pass through
// Decode unchanged, so histories recorded before encryption was turned on still replay.
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// Metadata written on an encrypted payload.
const (
	// EncodingEncrypted is the "encoding" metadata value of an encrypted payload.
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID names the metadata entry holding the id of the key that encrypted it.
	MetadataKeyID = "encryption-key-id"
	// KeySize is the length of an AES-256 key.
	KeySize = 32
)

// Key is one named AES-256 key.
type Key struct {
	ID     string
	Secret []byte
}

// Codec is a converter.PayloadCodec encrypting with one key and decrypting with any of its keys.
type Codec struct {
	aeads       map[string]cipher.AEAD
	encryptWith string
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New builds a codec from keys, encrypting with the key whose id is encryptWith.
func New(keys []Key, encryptWith string) (*Codec, error) {
	if len(keys) == 0 {
		return nil, errors.New("codec: no keys")
	}
	c := &Codec{aeads: make(map[string]cipher.AEAD, len(keys)), encryptWith: encryptWith}
	for _, k := range keys {
		if k.ID == "" {
			return nil, errors.New("codec: a key has an empty id")
		}
		if _, dup := c.aeads[k.ID]; dup {
			return nil, fmt.Errorf("codec: key id %q is used twice", k.ID)
		}
		if len(k.Secret) != KeySize {
			return nil, fmt.Errorf("codec: key %q is %d bytes; AES-256 needs %d", k.ID, len(k.Secret), KeySize)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("codec: key %q: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("codec: key %q: %w", k.ID, err)
		}
		c.aeads[k.ID] = aead
	}
	if _, ok := c.aeads[encryptWith]; !ok {
		return nil, fmt.Errorf("codec: encrypt_with %q is not one of the keys' ids", encryptWith)
	}
	return c, nil
}

// EncryptWith is the id of the key new payloads are encrypted with.
func (c *Codec) EncryptWith() string { return c.encryptWith }

// DataConverter is the SDK's default data converter with this codec applied to every payload.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// Encode encrypts each payload with the encrypt_with key. A payload that is already encrypted
// is kept as it is, so encoding twice does not nest.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := c.aeads[c.encryptWith]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if p == nil || isEncrypted(p) {
			out[i] = p
			continue
		}
		plain, err := p.Marshal()
		if err != nil {
			return payloads, fmt.Errorf("codec: marshal payload: %w", err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return payloads, fmt.Errorf("codec: nonce: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(EncodingEncrypted),
				MetadataKeyID:              []byte(c.encryptWith),
			},
			Data: aead.Seal(nonce, nonce, plain, []byte(c.encryptWith)),
		}
	}
	return out, nil
}

// Decode decrypts each encrypted payload with the key its metadata names. Payloads that are not
// encrypted are returned unchanged. An unknown key id or a payload that fails authentication
// (tampered, truncated, or sealed with a different key under the same id) is an error.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if p == nil || !isEncrypted(p) {
			out[i] = p
			continue
		}
		keyID := string(p.GetMetadata()[MetadataKeyID])
		if keyID == "" {
			return payloads, fmt.Errorf("codec: encrypted payload has no %s", MetadataKeyID)
		}
		aead, ok := c.aeads[keyID]
		if !ok {
			return payloads, fmt.Errorf("codec: payload was encrypted with key id %q, which is not configured (temporal.codec.keys)", keyID)
		}
		data := p.GetData()
		if len(data) < aead.NonceSize()+aead.Overhead() {
			return payloads, fmt.Errorf("codec: encrypted payload (key id %q) is too short", keyID)
		}
		n := aead.NonceSize()
		plain, err := aead.Open(nil, data[:n], data[n:], []byte(keyID))
		if err != nil {
			return payloads, fmt.Errorf("codec: decrypt payload (key id %q): %w", keyID, err)
		}
		var orig commonpb.Payload
		if err := orig.Unmarshal(plain); err != nil {
			return payloads, fmt.Errorf("codec: decrypted payload (key id %q): %w", keyID, err)
		}
		out[i] = &orig
	}
	return out, nil
}

func isEncrypted(p *commonpb.Payload) bool {
	return string(p.GetMetadata()[converter.MetadataEncoding]) == EncodingEncrypted
}

// Seal encrypts b, bytes mailhook keeps in PostgreSQL (a refused webhook request's body), as
// one payload with the encrypt_with key, and returns that encrypted payload's protobuf: Open
// (or any holder of the key, with the same codec) reads it back, and a key rotation covers it
// as it covers histories.
func (c *Codec) Seal(b []byte) ([]byte, error) {
	out, err := c.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingBinary)}, Data: b}})
	if err != nil {
		return nil, err
	}
	sealed, err := out[0].Marshal()
	if err != nil {
		return nil, fmt.Errorf("codec: marshal sealed payload: %w", err)
	}
	return sealed, nil
}

// Open returns the bytes Seal sealed; an error when the key it names is not configured or the
// bytes were tampered with.
func (c *Codec) Open(sealed []byte) ([]byte, error) {
	p := &commonpb.Payload{}
	if err := p.Unmarshal(sealed); err != nil {
		return nil, fmt.Errorf("codec: not a sealed payload: %w", err)
	}
	if !isEncrypted(p) {
		return nil, errors.New("codec: not a sealed payload")
	}
	out, err := c.Decode([]*commonpb.Payload{p})
	if err != nil {
		return nil, err
	}
	return out[0].Data, nil
}
