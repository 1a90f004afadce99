package codec_test

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/mailhook/mailhook/internal/codec"
)

func key(t *testing.T, id string) codec.Key {
	t.Helper()
	b := make([]byte, codec.KeySize)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return codec.Key{ID: id, Secret: b}
}

func mustNew(t *testing.T, encryptWith string, keys ...codec.Key) *codec.Codec {
	t.Helper()
	c, err := codec.New(keys, encryptWith)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type input struct {
	Recipient string `json:"recipient"`
	Body      string `json:"body"`
}

var secretInput = input{Recipient: "jane.doe@example.com", Body: "Dear Jane, your biopsy results…"}

func plainPayload(t *testing.T) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(secretInput)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func encode1(t *testing.T, c *codec.Codec, p *commonpb.Payload) *commonpb.Payload {
	t.Helper()
	out, err := c.Encode([]*commonpb.Payload{p})
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

func clone(t *testing.T, p *commonpb.Payload) *commonpb.Payload {
	t.Helper()
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var out commonpb.Payload
	if err := out.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	return &out
}

func decode1(c *codec.Codec, p *commonpb.Payload) (*commonpb.Payload, error) {
	out, err := c.Decode([]*commonpb.Payload{p})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func TestRoundTripThroughTheDataConverter(t *testing.T) {
	c := mustNew(t, "2026-11", key(t, "2026-11"))
	dc := c.DataConverter()
	p, err := dc.ToPayload(secretInput)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(p.Metadata[converter.MetadataEncoding]); got != codec.EncodingEncrypted {
		t.Fatalf("encoding %q, want %q", got, codec.EncodingEncrypted)
	}
	if got := string(p.Metadata[codec.MetadataKeyID]); got != "2026-11" {
		t.Fatalf("key id %q", got)
	}
	if len(p.Metadata) != 2 {
		t.Fatalf("metadata leaks more than encoding and key id: %v", p.Metadata)
	}
	raw, _ := p.Marshal()
	for _, secret := range []string{"jane.doe", "biopsy", "json/plain"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Fatalf("encrypted payload contains %q", secret)
		}
	}
	var back input
	if err := dc.FromPayload(p, &back); err != nil {
		t.Fatal(err)
	}
	if back != secretInput {
		t.Fatalf("round trip: %+v", back)
	}

	// The original payload, metadata included, comes back exactly.
	orig := plainPayload(t)
	dec, err := decode1(c, encode1(t, c, orig))
	if err != nil {
		t.Fatal(err)
	}
	if !dec.Equal(orig) {
		t.Fatalf("decoded %v, want %v", dec, orig)
	}
}

func TestEveryEncodingUsesAFreshNonce(t *testing.T) {
	c := mustNew(t, "k", key(t, "k"))
	p := plainPayload(t)
	a, b := encode1(t, c, p), encode1(t, c, p)
	if bytes.Equal(a.Data, b.Data) {
		t.Fatal("two encodings of one payload are identical: the nonce is reused")
	}
}

func TestKeyRotation(t *testing.T) {
	old, next := key(t, "2026-11"), key(t, "2027-05")
	before := mustNew(t, "2026-11", old)
	encOld := encode1(t, before, plainPayload(t))

	// encrypt_with moves to the new key; the old key stays listed.
	after := mustNew(t, "2027-05", old, next)
	if after.EncryptWith() != "2027-05" {
		t.Fatal(after.EncryptWith())
	}
	dec, err := decode1(after, encOld)
	if err != nil {
		t.Fatalf("a payload encrypted with the old key no longer decodes after rotation: %v", err)
	}
	if !dec.Equal(plainPayload(t)) {
		t.Fatalf("decoded %v", dec)
	}
	encNew := encode1(t, after, plainPayload(t))
	if got := string(encNew.Metadata[codec.MetadataKeyID]); got != "2027-05" {
		t.Fatalf("new payloads use key id %q, want 2027-05", got)
	}
	// A process that only knows the old key cannot read the new payloads.
	if _, err := decode1(before, encNew); err == nil || !strings.Contains(err.Error(), `"2027-05"`) {
		t.Fatalf("decoding with an unknown key id: %v", err)
	}
	// One Decode call can mix key ids and unencrypted payloads.
	out, err := after.Decode([]*commonpb.Payload{encOld, plainPayload(t), encNew, nil})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range out[:3] {
		if !p.Equal(plainPayload(t)) {
			t.Fatalf("payload %d: %v", i, p)
		}
	}
	if out[3] != nil {
		t.Fatal("nil payload not kept")
	}
}

func TestUnknownKeyIDFails(t *testing.T) {
	c := mustNew(t, "a", key(t, "a"))
	p := encode1(t, c, plainPayload(t))
	p.Metadata[codec.MetadataKeyID] = []byte("retired-2020")
	_, err := decode1(c, p)
	if err == nil || !strings.Contains(err.Error(), `"retired-2020"`) || !strings.Contains(err.Error(), "not configured") {
		t.Fatalf("err = %v", err)
	}
	delete(p.Metadata, codec.MetadataKeyID)
	if _, err := decode1(c, p); err == nil || !strings.Contains(err.Error(), codec.MetadataKeyID) {
		t.Fatalf("no key id: err = %v", err)
	}
}

func TestTamperedCiphertextFails(t *testing.T) {
	ka, kb := key(t, "a"), key(t, "b")
	c := mustNew(t, "a", ka, kb)
	enc := encode1(t, c, plainPayload(t))

	for name, tamper := range map[string]func(p *commonpb.Payload){
		"flipped ciphertext byte": func(p *commonpb.Payload) { p.Data[len(p.Data)/2] ^= 0x01 },
		"flipped nonce byte":      func(p *commonpb.Payload) { p.Data[0] ^= 0x80 },
		"flipped tag byte":        func(p *commonpb.Payload) { p.Data[len(p.Data)-1] ^= 0x01 },
		"truncated":               func(p *commonpb.Payload) { p.Data = p.Data[:len(p.Data)-1] },
		"too short":               func(p *commonpb.Payload) { p.Data = p.Data[:8] },
		"appended":                func(p *commonpb.Payload) { p.Data = append(p.Data, 0) },
		// The key id is authenticated: relabelling a payload with another configured key fails.
		"relabelled key id": func(p *commonpb.Payload) { p.Metadata[codec.MetadataKeyID] = []byte("b") },
	} {
		t.Run(name, func(t *testing.T) {
			p := clone(t, enc)
			tamper(p)
			if _, err := decode1(c, p); err == nil {
				t.Fatal("tampered payload decoded")
			}
		})
	}
	// Same id, different key material (a key replaced instead of rotated): fails.
	other := mustNew(t, "a", key(t, "a"))
	if _, err := decode1(other, enc); err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("wrong key: err = %v", err)
	}
	// The untouched payload still decodes.
	if _, err := decode1(c, enc); err != nil {
		t.Fatal(err)
	}
}

func TestUnencryptedPayloadsPassThroughDecode(t *testing.T) {
	c := mustNew(t, "a", key(t, "a"))
	nilPayload, _ := converter.GetDefaultDataConverter().ToPayload(nil)
	bin, _ := converter.GetDefaultDataConverter().ToPayload([]byte{0, 1, 2})
	in := []*commonpb.Payload{plainPayload(t), nilPayload, bin, {}}
	out, err := c.Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if out[i] != in[i] {
			t.Fatalf("payload %d changed: %v → %v", i, in[i], out[i])
		}
	}
	// So a history recorded before encryption was turned on decodes with the codec's converter.
	var back input
	if err := c.DataConverter().FromPayload(plainPayload(t), &back); err != nil || back != secretInput {
		t.Fatalf("plain payload through the codec converter: %+v, %v", back, err)
	}
}

func TestEncodeDoesNotNest(t *testing.T) {
	c := mustNew(t, "a", key(t, "a"))
	once := encode1(t, c, plainPayload(t))
	twice := encode1(t, c, once)
	if twice != once {
		t.Fatal("an encrypted payload was encrypted again")
	}
}

func TestNewRefusesBadKeys(t *testing.T) {
	good := key(t, "a")
	for name, tc := range map[string]struct {
		keys []codec.Key
		with string
		want string
	}{
		"no keys":             {nil, "a", "no keys"},
		"short key":           {[]codec.Key{{ID: "a", Secret: make([]byte, 16)}}, "a", "16 bytes"},
		"empty id":            {[]codec.Key{{ID: "", Secret: good.Secret}}, "", "empty id"},
		"duplicate id":        {[]codec.Key{good, good}, "a", "twice"},
		"unknown encryptWith": {[]codec.Key{good}, "b", `"b"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := codec.New(tc.keys, tc.with)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
