package ses

import (
	"bytes"
	"crypto"
	"crypto/sha1" //nolint:gosec // SNS SignatureVersion 1 is SHA1withRSA; it is what SNS sends by default.
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// SNS message types: the x-amz-sns-message-type header and the body's Type.
const (
	TypeNotification             = "Notification"
	TypeSubscriptionConfirmation = "SubscriptionConfirmation"
	TypeUnsubscribeConfirmation  = "UnsubscribeConfirmation"
)

// Signature versions (the topic's SignatureVersion attribute).
const (
	// SignatureVersion1 is SHA1withRSA, the SNS default.
	SignatureVersion1 = "1"
	// SignatureVersion2 is SHA256withRSA.
	SignatureVersion2 = "2"
)

// Envelope is the JSON document SNS POSTs to an HTTP(S) subscription. Field names follow SNS
// exactly. Optional fields are omitted when empty, so an Envelope marshals to what SNS sends.
type Envelope struct {
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

	// hasSubject records that a decoded body carried a Subject key, even an empty one: the
	// signature covers Subject whenever it is present.
	hasSubject bool
}

// errEnvelope is the cause behind every decoding failure; the detail names a key, never a value.
var errEnvelope = errors.New("malformed SNS envelope")

// envelopeKeys maps each key Mailhook reads, lower-cased, to its exact SNS spelling.
var envelopeKeys = map[string]string{
	"type": "Type", "messageid": "MessageId", "token": "Token", "topicarn": "TopicArn",
	"subject": "Subject", "message": "Message", "subscribeurl": "SubscribeURL",
	"timestamp": "Timestamp", "signatureversion": "SignatureVersion", "signature": "Signature",
	"signingcerturl": "SigningCertURL", "unsubscribeurl": "UnsubscribeURL",
}

// decodeEnvelope decodes an SNS body strictly. encoding/json would accept a duplicated key (last
// one wins) or a key in another case ("message" for "Message"); a consumer of the raw body that
// resolves those differently would then read unsigned content. So a body whose top-level keys
// repeat, or spell a known key in another case, is rejected, as is anything after the object.
// Known keys must hold strings; null counts as absent.
func decodeEnvelope(body []byte) (Envelope, error) {
	var env Envelope
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return env, fmt.Errorf("%w: not JSON", errEnvelope)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return env, fmt.Errorf("%w: not a JSON object", errEnvelope)
	}
	seen := make(map[string]bool, 16)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return env, fmt.Errorf("%w: not JSON", errEnvelope)
		}
		key, _ := tok.(string)
		lower := strings.ToLower(key)
		if seen[lower] {
			return env, fmt.Errorf("%w: a key appears twice", errEnvelope)
		}
		seen[lower] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return env, fmt.Errorf("%w: not JSON", errEnvelope)
		}
		exact, known := envelopeKeys[lower]
		if !known {
			continue
		}
		if key != exact {
			return env, fmt.Errorf("%w: key %q must be spelled %q", errEnvelope, lower, exact)
		}
		if string(raw) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return env, fmt.Errorf("%w: %q is not a string", errEnvelope, exact)
		}
		switch exact {
		case "Type":
			env.Type = s
		case "MessageId":
			env.MessageID = s
		case "Token":
			env.Token = s
		case "TopicArn":
			env.TopicARN = s
		case "Subject":
			env.Subject, env.hasSubject = s, true
		case "Message":
			env.Message = s
		case "SubscribeURL":
			env.SubscribeURL = s
		case "Timestamp":
			env.Timestamp = s
		case "SignatureVersion":
			env.SignatureVersion = s
		case "Signature":
			env.Signature = s
		case "SigningCertURL":
			env.SigningCertURL = s
		case "UnsubscribeURL":
			env.UnsubscribeURL = s
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return env, fmt.Errorf("%w: not JSON", errEnvelope)
	}
	if _, err := dec.Token(); err != io.EOF {
		return env, fmt.Errorf("%w: data after the object", errEnvelope)
	}
	return env, nil
}

// stringToSign builds the canonical string SNS signs: "Key\nValue\n" for each signed key, in
// byte order of the key names (sns-verify-signature-of-message):
//
//	Notification:                          Message, MessageId, Subject (if present), Timestamp, TopicArn, Type
//	SubscriptionConfirmation, Unsubscribe: Message, MessageId, SubscribeURL, Timestamp, Token, TopicArn, Type
func stringToSign(e *Envelope) (string, error) {
	var pairs [7][2]string
	n := 0
	add := func(k, v string) { pairs[n] = [2]string{k, v}; n++ }
	switch e.Type {
	case TypeNotification:
		add("Message", e.Message)
		add("MessageId", e.MessageID)
		if e.hasSubject || e.Subject != "" {
			add("Subject", e.Subject)
		}
		add("Timestamp", e.Timestamp)
		add("TopicArn", e.TopicARN)
		add("Type", e.Type)
	case TypeSubscriptionConfirmation, TypeUnsubscribeConfirmation:
		add("Message", e.Message)
		add("MessageId", e.MessageID)
		add("SubscribeURL", e.SubscribeURL)
		add("Timestamp", e.Timestamp)
		add("Token", e.Token)
		add("TopicArn", e.TopicARN)
		add("Type", e.Type)
	default:
		return "", fmt.Errorf("unknown message Type")
	}
	size := 0
	for _, p := range pairs[:n] {
		size += len(p[0]) + len(p[1]) + 2
	}
	var b strings.Builder
	b.Grow(size)
	for _, p := range pairs[:n] {
		b.WriteString(p[0])
		b.WriteByte('\n')
		b.WriteString(p[1])
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// digest hashes s with the hash of a signature version.
func digest(version, s string) (crypto.Hash, []byte, bool) {
	switch version {
	case SignatureVersion1:
		h := sha1.Sum([]byte(s)) //nolint:gosec // see the import
		return crypto.SHA1, h[:], true
	case SignatureVersion2:
		h := sha256.Sum256([]byte(s))
		return crypto.SHA256, h[:], true
	}
	return 0, nil, false
}
