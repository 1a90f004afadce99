package signature

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// MaxECDSASignatureLen caps the base64 signature ECDSA.Verify decodes. A DER ECDSA P-256
// signature is at most 72 bytes (96 base64 characters); the cap keeps a hostile header from
// costing more than a legitimate one.
const MaxECDSASignatureLen = 256

// ECDSA is the scheme of SendGrid's Signed Event Webhook: an ECDSA P-256 signature, base64 ASN.1
// DER, over SHA-256 of the timestamp header value immediately followed by the raw body (no
// separator). A request is accepted when any of the keys verifies it.
type ECDSA struct {
	keys      []*ecdsa.PublicKey
	tolerance time.Duration
}

// NewECDSA builds the scheme for verification keys, each parsed with ParseECDSAPublicKey.
// tolerance bounds |now - timestamp|; zero or less disables the check.
func NewECDSA(keys []*ecdsa.PublicKey, tolerance time.Duration) (*ECDSA, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no verification key", ErrInvalidSecret)
	}
	for i, k := range keys {
		if k == nil || k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w: key %d is not an ECDSA P-256 public key", ErrInvalidSecret, i)
		}
	}
	return &ECDSA{keys: append([]*ecdsa.PublicKey(nil), keys...), tolerance: tolerance}, nil
}

// ParseECDSAPublicKey decodes a verification key as SendGrid's dashboard shows it: base64 DER
// (PKIX) P-256, line breaks allowed, or the same in PEM. Error messages never include the key
// text.
func ParseECDSAPublicKey(s string) (*ecdsa.PublicKey, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("is empty")
	}
	var der []byte
	if strings.HasPrefix(s, "-----BEGIN") {
		block, _ := pem.Decode([]byte(s))
		if block == nil || block.Type != "PUBLIC KEY" {
			return nil, errors.New("is not a PEM \"PUBLIC KEY\" block")
		}
		der = block.Bytes
	} else {
		// Keys pasted from the dashboard sometimes carry line breaks; base64 has no spaces.
		compact := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, s)
		var err error
		if der, err = base64.StdEncoding.DecodeString(compact); err != nil {
			return nil, errors.New("is not base64 (expected the verification key from the Signed Event Webhook settings)")
		}
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("is not a DER (PKIX) public key")
	}
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, errors.New("is not an ECDSA P-256 public key")
	}
	return k, nil
}

// Verify checks sig (base64 DER) over timestamp and body. The caller reports which of its
// headers is missing; an empty value here is a bare ErrMissingSignature.
func (e *ECDSA) Verify(sig, timestamp string, body []byte, now time.Time) error {
	switch {
	case sig == "" || timestamp == "":
		return ErrMissingSignature
	case len(sig) > MaxECDSASignatureLen:
		return fmt.Errorf("%w: signature is %d bytes, limit %d", ErrMalformedSignature, len(sig), MaxECDSASignatureLen)
	}
	unix, ok := ParseUnix(timestamp)
	if !ok {
		return fmt.Errorf("%w: timestamp is not unix seconds", ErrMalformedSignature)
	}
	der, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(der) == 0 {
		return fmt.Errorf("%w: signature is not base64", ErrMalformedSignature)
	}
	// Checked before the (comparatively expensive) ECDSA verification.
	if signed := time.Unix(unix, 0); !WithinTolerance(signed, now, e.tolerance) {
		return fmt.Errorf("%w: signed at %d, %s from now, tolerance %s",
			ErrTimestampOutOfTolerance, unix, now.Sub(signed).Round(time.Second), e.tolerance)
	}
	d := ecdsaDigest(timestamp, body)
	for _, k := range e.keys {
		if ecdsa.VerifyASN1(k, d[:], der) {
			return nil
		}
	}
	return fmt.Errorf("%w: checked against %d key(s)", ErrNoMatchingSignature, len(e.keys))
}

// ecdsaDigest is SHA-256 of timestamp || body, what SendGrid signs.
func ecdsaDigest(timestamp string, body []byte) [sha256.Size]byte {
	h := sha256.New()
	_, _ = io.WriteString(h, timestamp)
	_, _ = h.Write(body)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}
