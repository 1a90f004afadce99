package simulate

import (
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/signature"
)

// The simulator plays each provider as a client: it writes their payloads and signs them as
// their documentation says (docs/providers), never through mailhook's adapters, which only
// verify. Postscale's lifecycle (simulate.go) also sends an open and an inbound email; the
// others send one message's sent, delivered and hard bounce, out of order, and a retry.

// Providers lists the providers simulate speaks. ses, signed by Amazon SNS with Amazon's
// certificate, which no one else holds, is not among them.
var Providers = []string{"postscale", "resend", "mailgun", "postmark", "sendgrid", "hmac", "standard-webhooks"}

// Speaks reports whether simulate can send provider's webhooks.
func Speaks(provider string) bool { return slices.Contains(Providers, provider) }

// NeedsKey reports whether provider signs with a private key (--key) rather than the endpoint's
// configured secret: SendGrid's endpoint holds only the public half.
func NeedsKey(provider string) bool { return provider == "sendgrid" }

// NeedsMapping reports whether provider's payloads are the sender's own, written from the
// endpoint's generic: block (Options.Generic): its field paths and status_map, and for hmac
// how it signs.
func NeedsMapping(provider string) bool { return provider == "hmac" || provider == "standard-webhooks" }

// speaker writes one provider's lifecycle of a message and signs its requests.
type speaker struct {
	// messageID is the message key mailhook files the events under, from the id the send
	// would have returned.
	messageID func(id string) string
	steps     func(id string, base time.Time) []Step
	sign      func(req *http.Request, st Step, secret string, key *ecdsa.PrivateKey, now time.Time) error
	// events is how many events the message's history ends with.
	events int
}

var speakers = map[string]speaker{
	"resend": {
		messageID: func(id string) string { return id },
		steps: func(id string, base time.Time) []Step {
			ev := func(kind, typ string, at time.Time, extra string) Step {
				return Step{ID: "msg_" + id + "_" + kind, Body: fmt.Appendf(nil,
					`{"type":%q,"created_at":%q,"data":{"email_id":%q,"created_at":%q,"from":"Acme <hello@yourapp.example>","to":[%q],"subject":"Welcome!"%s}}`,
					typ, at.UTC().Format(time.RFC3339Nano), id, base.UTC().Format(time.RFC3339Nano), Recipient, extra)}
			}
			return lifecycle(
				ev("sent", "email.sent", base, ""),
				ev("delivered", "email.delivered", base.Add(2*time.Second), ""),
				ev("bounced", "email.bounced", base.Add(10*time.Minute),
					`,"bounce":{"type":"Permanent","subType":"General","message":"550 5.1.1 The email account that you tried to reach does not exist."}`))
		},
		sign: func(req *http.Request, st Step, secret string, _ *ecdsa.PrivateKey, now time.Time) error {
			s, err := signature.NewStandard(secret, 0)
			if err != nil {
				return fmt.Errorf("resend secret (whsec_…): %w", err)
			}
			sig, err := s.Sign(st.ID, now, st.Body)
			if err != nil {
				return err
			}
			req.Header.Set("svix-id", st.ID)
			req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
			req.Header.Set("svix-signature", sig)
			return nil
		},
		events: 3,
	},
	"mailgun": {
		messageID: func(id string) string { return id + "@yourapp.example" },
		steps: func(id string, base time.Time) []Step {
			ev := func(kind, event string, at time.Time, extra string) Step {
				return Step{ID: id + "-" + kind, Body: fmt.Appendf(nil,
					`{"event":%q,"id":%q,"timestamp":%s,"recipient":%q,"message":{"headers":{"to":%q,"message-id":%q,"from":"hello@yourapp.example","subject":"Welcome!"}}%s}`,
					event, id+"-"+kind, strconv.FormatFloat(float64(at.UnixMicro())/1e6, 'f', 6, 64), Recipient, Recipient, id+"@yourapp.example", extra)}
			}
			return lifecycle(
				ev("accepted", "accepted", base, ""),
				ev("delivered", "delivered", base.Add(2*time.Second), `,"delivery-status":{"code":250,"message":"OK"}`),
				ev("failed", "failed", base.Add(10*time.Minute),
					`,"severity":"permanent","reason":"bounce","delivery-status":{"code":550,"message":"5.1.1 The email account that you tried to reach does not exist.","description":""}`))
		},
		// Mailgun signs a token and a timestamp it puts in the body, beside the event (mailgunBody):
		// nothing goes in the headers.
		sign:   func(*http.Request, Step, string, *ecdsa.PrivateKey, time.Time) error { return nil },
		events: 3,
	},
	"postmark": {
		messageID: func(id string) string { return id },
		steps: func(id string, base time.Time) []Step {
			delivered := Step{Body: fmt.Appendf(nil,
				`{"RecordType":"Delivery","MessageStream":"outbound","MessageID":%q,"Recipient":%q,"Tag":"welcome","DeliveredAt":%q,"Details":"250 OK"}`,
				id, Recipient, base.Add(2*time.Second).UTC().Format(time.RFC3339Nano))}
			// A bounce record's numeric ID is its event id: one per simulated message.
			bounceID, _ := strconv.ParseUint(id[len(id)-8:], 16, 64)
			bounced := Step{Body: fmt.Appendf(nil,
				`{"RecordType":"Bounce","MessageStream":"outbound","ID":%d,"Type":"HardBounce","TypeCode":1,"Name":"Hard bounce","MessageID":%q,"Email":%q,"From":"hello@yourapp.example","BouncedAt":%q,"Description":"The server was unable to deliver your message (ex: unknown user, mailbox not found).","Details":"smtp;550 5.1.1 The email account that you tried to reach does not exist.","Inactive":true,"CanActivate":true,"Subject":"Welcome!"}`,
				bounceID, id, Recipient, base.Add(10*time.Minute).UTC().Format(time.RFC3339Nano))}
			// Postmark sends no "sent" record: the delivery comes after the bounce, then again.
			return []Step{
				named("Bounce (a delayed DSN)", bounced),
				named("Delivery (arrives after the bounce)", delivered),
				named("Delivery (provider retry: duplicate)", delivered),
			}
		},
		// Postmark signs nothing: the URL's user:password, sent as basic auth, is its proof.
		sign: func(req *http.Request, _ Step, secret string, _ *ecdsa.PrivateKey, _ time.Time) error {
			user, password, ok := strings.Cut(secret, ":")
			if !ok {
				return errors.New("postmark secret: want user:password")
			}
			req.SetBasicAuth(user, password)
			return nil
		},
		events: 2,
	},
	"sendgrid": {
		messageID: func(id string) string { return id },
		steps: func(id string, base time.Time) []Step {
			ev := func(kind, event string, at time.Time, extra string) Step {
				return Step{Body: fmt.Appendf(nil,
					`[{"email":%q,"timestamp":%d,"smtp-id":"<%s@yourapp.example>","event":%q,"sg_event_id":%q,"sg_message_id":%q%s}]`,
					Recipient, at.Unix(), id, event, id+"-"+kind, id+".filter0001.1.0", extra)}
			}
			return lifecycle(
				ev("processed", "processed", base, ""),
				ev("delivered", "delivered", base.Add(2*time.Second), `,"response":"250 OK"`),
				ev("bounce", "bounce", base.Add(10*time.Minute),
					`,"type":"bounce","bounce_classification":"Invalid Address","reason":"550 5.1.1 The email account that you tried to reach does not exist.","status":"5.1.1"`))
		},
		// SendGrid signs timestamp || body with its ECDSA key; the endpoint lists the public key.
		sign: func(req *http.Request, st Step, _ string, key *ecdsa.PrivateKey, now time.Time) error {
			if key == nil {
				return errors.New("sendgrid signs with a private key: pass --key (mailhook-loadtest keygen makes one, and prints the public key for the endpoint)")
			}
			ts := strconv.FormatInt(now.Unix(), 10)
			d := sha256.Sum256(append([]byte(ts), st.Body...))
			sig, err := ecdsa.SignASN1(rand.Reader, key, d[:])
			if err != nil {
				return fmt.Errorf("sendgrid sign: %w", err)
			}
			req.Header.Set("X-Twilio-Email-Event-Webhook-Timestamp", ts)
			req.Header.Set("X-Twilio-Email-Event-Webhook-Signature", base64.StdEncoding.EncodeToString(sig))
			return nil
		},
		events: 3,
	},
}

// lifecycle orders a message's sent, delivered and bounced the wrong way round, with a retry of
// the delivery: whatever the order, the message must end bounced.
func lifecycle(sent, delivered, bounced Step) []Step {
	return []Step{
		named("delivered (arrives before sent)", delivered),
		named("bounced (a delayed DSN)", bounced),
		named("sent (late)", sent),
		named("delivered (provider retry: duplicate)", delivered),
	}
}

func named(name string, st Step) Step {
	st.Name = name
	return st
}

// mailgunBody wraps a Mailgun event in the body Mailgun posts: a signature block of a fresh
// token and the time, HMAC-SHA256 keyed by the endpoint's signing key, beside the event.
func mailgunBody(key string, event []byte, now time.Time) []byte {
	ts := strconv.FormatInt(now.Unix(), 10)
	token := randomHex(25)
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(ts))
	m.Write([]byte(token))
	sig, _ := json.Marshal(map[string]string{"timestamp": ts, "token": token, "signature": hex.EncodeToString(m.Sum(nil))})
	return fmt.Appendf(nil, `{"signature":%s,"event-data":%s}`, sig, event)
}

// LoadKey reads an ECDSA private key, PEM or DER, PKCS#8 or SEC 1 (what `mailhook-loadtest
// keygen` writes).
func LoadKey(path string) (*ecdsa.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	der := raw
	if b, _ := pem.Decode(raw); b != nil {
		der = b.Bytes
	}
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		if ec, ok := k.(*ecdsa.PrivateKey); ok {
			return ec, nil
		}
		return nil, fmt.Errorf("key %s: not an ECDSA key", path)
	}
	k, err := x509.ParseECPrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("key %s: not an ECDSA private key (PEM or DER, PKCS#8 or SEC 1)", path)
	}
	return k, nil
}
