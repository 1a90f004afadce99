package ses

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
)

// offlineCertURL is where the offline adapter's certificate sits in its cache.
const offlineCertURL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem"

// failingTransport fails every request, so a fuzzed certificate URL never reaches the network.
type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("offline")
}

// offlineAdapter is an adapter with the default host pattern whose only usable certificate is
// injected into its cache.
func offlineAdapter(t testing.TB) *Adapter {
	t.Helper()
	k, _ := keys(t)
	a, err := New(provider.Settings{
		TopicARNs:  []string{testTopic},
		HTTPClient: &http.Client{Transport: failingTransport{}, Timeout: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	ad := a.(*Adapter)
	cert, err := parseCertPEM(mustPEMValid(t, k, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	ad.certs.put(offlineCertURL, cert)
	return ad
}

func offlineEnvelope(message string) Envelope {
	return Envelope{
		Type: TypeNotification, MessageID: snsID, TopicARN: testTopic, Message: message,
		Timestamp: snsStamp, SigningCertURL: offlineCertURL,
	}
}

// fixtureMessages returns the SES JSON of every fixture.
func fixtureMessages(t testing.TB) [][]byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	var out [][]byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// checkParsed holds for any Parse result, whatever the input.
func checkParsed(t *testing.T, events []domain.Event, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, provider.ErrBadRequest) {
			t.Fatalf("Parse error does not wrap ErrBadRequest: %v", err)
		}
		if len(events) != 0 {
			t.Fatal("Parse returned events with an error")
		}
		return
	}
	if len(events) == 0 {
		t.Fatal("Parse returned no events and no error")
	}
	keys := map[string]bool{}
	for _, ev := range events {
		if ev.Provider != Name || ev.EventID == "" || ev.Kind == "" || ev.Type == "" {
			t.Fatalf("incomplete event: %+v", ev)
		}
		if keys[ev.Key()] {
			t.Fatalf("duplicate event key %q", ev.Key())
		}
		keys[ev.Key()] = true
		switch ev.Kind {
		case domain.KindStatus:
			if ev.Status == domain.StatusNone || ev.MessageID == "" {
				t.Fatalf("status event without status or message: %+v", ev)
			}
		case domain.KindOpened, domain.KindClicked, domain.KindUnsubscribed:
			if ev.MessageID == "" || ev.Status != domain.StatusNone {
				t.Fatalf("engagement event: %+v", ev)
			}
		case domain.KindInbound:
			if ev.Status != domain.StatusNone {
				t.Fatalf("inbound event with a status: %+v", ev)
			}
		case domain.KindUnknown:
		default:
			t.Fatalf("unexpected kind %q", ev.Kind)
		}
		if ev.BounceType != "" && ev.Status != domain.StatusBounced {
			t.Fatalf("bounce type on a %s event", ev.Status)
		}
		if ev.Bounce != nil && ev.Status != domain.StatusBounced && ev.Status != domain.StatusFailed {
			t.Fatalf("bounce details on a %s event", ev.Status)
		}
		if !json.Valid(ev.Raw) {
			t.Fatal("Raw is not JSON")
		}
		if _, err := json.Marshal(ev); err != nil {
			t.Fatalf("event does not marshal: %v", err)
		}
	}
}

// FuzzParse feeds arbitrary SES JSON (wrapped in an SNS envelope) and arbitrary envelopes to
// Parse. Seeds: every fixture, plus testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, m := range fixtureMessages(f) {
		f.Add(m)
	}
	f.Add([]byte(`{"eventType":"Bounce","bounce":{"bouncedRecipients":[{"emailAddress":"A <a@x.io>"},"b@x.io",{"emailAddress":"a@x.io"}]},"mail":{"messageId":"m","destination":["a@x.io","b@x.io"]}}`))
	f.Add(offlineEnvelope(`{"eventType":"Open","mail":{"messageId":"m"}}`).Body())
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := parse(offlineEnvelope(string(data)).Body())
		checkParsed(t, events, err)
		events, err = parse(data)
		checkParsed(t, events, err)
	})
}

// FuzzVerify feeds arbitrary bodies and message-type headers to Verify, Control and Parse of an
// adapter that cannot reach the network. Seeds are validly signed envelopes (both versions), so
// mutations explore near-valid input. Whatever verifies must carry a signature that really
// matches the injected certificate's key: stringToSign of the decoded envelope is re-checked.
func FuzzVerify(f *testing.F) {
	k, _ := keys(f)
	add := func(env Envelope, version string) {
		if err := signEnvelope(&env, k, version); err != nil {
			f.Fatal(err)
		}
		f.Add(env.Type, env.Body())
	}
	for _, m := range fixtureMessages(f)[:3] {
		add(offlineEnvelope(string(m)), SignatureVersion1)
		add(offlineEnvelope(string(m)), SignatureVersion2)
	}
	withSubject := offlineEnvelope(`{"eventType":"Send","mail":{"messageId":"m"}}`)
	withSubject.Subject = "s"
	add(withSubject, SignatureVersion2)
	conf := offlineEnvelope("confirm")
	conf.Type, conf.Token = TypeSubscriptionConfirmation, "tok"
	conf.SubscribeURL = "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=" + testTopic + "&Token=tok"
	add(conf, SignatureVersion1)

	a := offlineAdapter(f)
	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		h := http.Header{}
		h.Set(MessageTypeHeader, typ)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r := provider.Request{Ctx: ctx, Header: h, Body: body, RemoteIP: "192.0.2.1", Now: time.Now()}
		err := a.Verify(r)
		if err != nil {
			if !errors.Is(err, provider.ErrUnauthorized) && !errors.Is(err, ErrCertUnavailable) {
				t.Fatalf("Verify error wraps neither ErrUnauthorized nor ErrCertUnavailable: %v", err)
			}
			return
		}
		env, derr := decodeEnvelope(body)
		if derr != nil {
			t.Fatalf("verified a body that does not decode: %v", derr)
		}
		if env.SigningCertURL != offlineCertURL || !a.topics[env.TopicARN] || env.Type != typ {
			t.Fatalf("verified an envelope that breaks a rule: %+v", env)
		}
		if _, err := stringToSign(&env); err != nil {
			t.Fatalf("verified an envelope without a canonical string: %v", err)
		}
		// The HTTP layer's next steps must not panic either.
		handled, _, cerr := a.Control(r)
		if cerr != nil && strings.Contains(cerr.Error(), "panic") {
			t.Fatal(cerr)
		}
		if !handled && env.Type == TypeNotification {
			events, perr := a.Parse(r)
			checkParsed(t, events, perr)
		}
	})
}
