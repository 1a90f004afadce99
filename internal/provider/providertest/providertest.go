// Package providertest signs webhook requests the way each provider does, for tests and for the
// load generator. It is the sender side of the adapters' Verify and is never imported by the
// server: the production packages only verify.
//
// The signers are written from each provider's documentation, not from the verifiers, so a test
// that signs here and verifies in an adapter checks one against the other. Header names are
// spelled out for the same reason (and because the adapters' own tests import this package,
// which therefore cannot import them).
package providertest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SNS SignatureVersion 1 is SHA1withRSA.
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/signature"
)

// Postscale signs "t=<unix>,v1=<hex HMAC-SHA256(secret, "<unix>.<body>")>" in
// X-Postscale-Signature, keyed with the bytes of the whole secret string.
const PostscaleSignatureHeader = "X-Postscale-Signature"

// PostscaleSignature returns the X-Postscale-Signature value for body signed with secret at at.
func PostscaleSignature(secret string, at time.Time, body []byte) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(HMAC(sha256.New, secret, []byte(ts), []byte("."), body))
}

// SignPostscale sets X-Postscale-Signature on req as Postscale would for body at at. It does
// not touch the request body.
func SignPostscale(req *http.Request, secret string, body []byte, at time.Time) {
	req.Header.Set(PostscaleSignatureHeader, PostscaleSignature(secret, at, body))
}

// SendGrid's Signed Event Webhook headers.
const (
	SendGridSignatureHeader = "X-Twilio-Email-Event-Webhook-Signature"
	SendGridTimestampHeader = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// SendGridSignature returns the signature header value SendGrid would send for body signed at ts
// (the exact timestamp header value): base64 ASN.1 DER ECDSA over SHA-256(ts || body). It panics
// if the key cannot sign, which only a malformed key causes.
func SendGridSignature(priv *ecdsa.PrivateKey, ts string, body []byte) string {
	d := sha256.Sum256(append([]byte(ts), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, priv, d[:])
	if err != nil {
		panic("providertest: sendgrid sign: " + err.Error())
	}
	return base64.StdEncoding.EncodeToString(sig)
}

// SignSendGrid sets both signature headers on req as SendGrid would for body at now.
func SignSendGrid(req *http.Request, priv *ecdsa.PrivateKey, body []byte, now time.Time) {
	ts := strconv.FormatInt(now.Unix(), 10)
	req.Header.Set(SendGridTimestampHeader, ts)
	req.Header.Set(SendGridSignatureHeader, SendGridSignature(priv, ts, body))
}

// SendGridPublicKey encodes pub the way the SendGrid dashboard shows a verification key (base64
// DER PKIX), ready for Settings.Secrets. It panics for a key x509 cannot marshal.
func SendGridPublicKey(pub *ecdsa.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic("providertest: marshal public key: " + err.Error())
	}
	return base64.StdEncoding.EncodeToString(der)
}

// MailgunSignature returns what Mailgun puts in signature.signature for timestamp and token:
// hex(HMAC-SHA256(key, timestamp + token)).
func MailgunSignature(key, timestamp, token string) string {
	return hex.EncodeToString(HMAC(sha256.New, key, []byte(timestamp), []byte(token)))
}

// MailgunBody builds a complete webhook body as Mailgun sends it: eventData (one JSON object)
// under "event-data" and a signature block signed with key at timestamp with token. It panics if
// eventData is not valid JSON.
func MailgunBody(key, timestamp, token string, eventData []byte) []byte {
	if !json.Valid(eventData) {
		panic("providertest: MailgunBody: event data is not valid JSON")
	}
	sig, err := json.Marshal(map[string]string{"timestamp": timestamp, "token": token, "signature": MailgunSignature(key, timestamp, token)})
	if err != nil {
		panic(err)
	}
	var b bytes.Buffer
	b.WriteString(`{"signature":`)
	b.Write(sig)
	b.WriteString(`,"event-data":`)
	b.Write(eventData)
	b.WriteString("}")
	return b.Bytes()
}

// PostmarkHeader returns the Authorization header Postmark sends for a webhook URL that carries
// user:password: Postmark signs nothing, the credentials are its only proof.
func PostmarkHeader(user, password string) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
	return h
}

// StandardHeaders returns the three Standard Webhooks headers (webhook-id, webhook-timestamp,
// webhook-signature) a sender such as Resend (through Svix) attaches to body with secret at ts.
// It signs with signature.Standard, the signer mailhook's own notifications use.
func StandardHeaders(secret, id string, ts time.Time, body []byte) (http.Header, error) {
	s, err := signature.NewStandard(secret, 0)
	if err != nil {
		return nil, err
	}
	sig, err := s.Sign(id, ts, body)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(signature.HeaderWebhookID, id)
	h.Set(signature.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(signature.HeaderWebhookSignature, sig)
	return h, nil
}

// HMAC returns the HMAC of the concatenated parts under key with newHash (sha256.New,
// sha512.New): what a sender of the generic "hmac" provider signs, and the primitive of the
// Postscale and Mailgun signers above.
func HMAC(newHash func() hash.Hash, key string, parts ...[]byte) []byte {
	m := hmac.New(newHash, []byte(key))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// SNS message types.
const (
	SNSNotification             = "Notification"
	SNSSubscriptionConfirmation = "SubscriptionConfirmation"
	SNSUnsubscribeConfirmation  = "UnsubscribeConfirmation"
)

// SNSEnvelope is the JSON document SNS POSTs to an HTTPS subscription (Amazon SES events), with
// SNS's field names. Optional fields are omitted when empty, so Body is what SNS sends.
type SNSEnvelope struct {
	Type             string `json:"Type"`
	MessageID        string `json:"MessageId"`
	Token            string `json:"Token,omitempty"`
	TopicARN         string `json:"TopicArn"`
	Subject          string `json:"Subject,omitempty"`
	Message          string `json:"Message"`
	SubscribeURL     string `json:"SubscribeURL,omitempty"`
	Timestamp        string `json:"Timestamp"`
	SignatureVersion string `json:"SignatureVersion"`
	Signature        string `json:"Signature"`
	SigningCertURL   string `json:"SigningCertURL"`
	UnsubscribeURL   string `json:"UnsubscribeURL,omitempty"`
}

// Sign signs e as SNS would with key: it sets SignatureVersion to version ("1", SHA1withRSA, or
// "2", SHA256withRSA) and Signature to the base64 RSA PKCS#1 v1.5 signature of the canonical
// string. Set every other field first; changing a signed field afterwards invalidates it.
func (e *SNSEnvelope) Sign(key *rsa.PrivateKey, version string) error {
	sig, err := SNSSignature(e.signedFields(), key, version)
	if err != nil {
		return err
	}
	e.SignatureVersion, e.Signature = version, sig
	return nil
}

func (e *SNSEnvelope) signedFields() map[string]string {
	f := map[string]string{
		"Type": e.Type, "MessageId": e.MessageID, "TopicArn": e.TopicARN, "Message": e.Message,
		"Timestamp": e.Timestamp, "Token": e.Token, "SubscribeURL": e.SubscribeURL,
	}
	if e.Subject != "" {
		f["Subject"] = e.Subject
	}
	return f
}

// Body marshals e to the JSON SNS would POST.
func (e SNSEnvelope) Body() []byte {
	b, err := json.Marshal(e)
	if err != nil { // an SNSEnvelope holds only strings
		panic(err)
	}
	return b
}

// SNSSignature returns the base64 Signature SNS computes over a message's signed keys, given
// with SNS's spelling (Message, MessageId, Subject when present, SubscribeURL, Timestamp, Token,
// TopicArn, Type): "Key\nValue\n" for each key the message type signs, in byte order of the
// names (sns-verify-signature-of-message).
func SNSSignature(fields map[string]string, key *rsa.PrivateKey, version string) (string, error) {
	if key == nil {
		return "", errors.New("providertest: sign SNS message: nil key")
	}
	var keys []string
	switch fields["Type"] {
	case SNSNotification:
		keys = []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	case SNSSubscriptionConfirmation, SNSUnsubscribeConfirmation:
		keys = []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	default:
		return "", fmt.Errorf("providertest: sign SNS message: unknown Type %q", fields["Type"])
	}
	var b strings.Builder
	for _, k := range keys {
		v, ok := fields[k]
		if !ok && k == "Subject" {
			continue
		}
		b.WriteString(k + "\n" + v + "\n")
	}
	var (
		h   crypto.Hash
		sum []byte
	)
	switch version {
	case "1":
		d := sha1.Sum([]byte(b.String())) //nolint:gosec // see the import
		h, sum = crypto.SHA1, d[:]
	case "2":
		d := sha256.Sum256([]byte(b.String()))
		h, sum = crypto.SHA256, d[:]
	default:
		return "", fmt.Errorf("providertest: sign SNS message: unsupported signature version %q", version)
	}
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, h, sum)
	if err != nil {
		return "", fmt.Errorf("providertest: sign SNS message: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// SelfSignedCertPEM returns a PEM certificate for key, valid from notBefore to notAfter, to serve
// at a SigningCertURL (from an httptest TLS server whose host the endpoint's cert_host_pattern
// matches, with its client as Settings.HTTPClient).
func SelfSignedCertPEM(key *rsa.PrivateKey, notBefore, notAfter time.Time) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "sns.amazonaws.com (mailhook test)"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// SignatureReason returns the short message of the signature sentinel err wraps, or "invalid
// signature" when it wraps none: tests use it to check that a verifier's innermost error, which
// the HTTP layer reports, is one of the sentinels and echoes nothing from the request.
func SignatureReason(err error) string {
	for _, s := range []error{
		signature.ErrMissingSignature, signature.ErrMalformedSignature, signature.ErrTimestampOutOfTolerance,
		signature.ErrNoMatchingSignature, signature.ErrInvalidSecret,
	} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "invalid signature"
}
