package ses

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/provider"
)

const (
	testTopic = "arn:aws:sns:us-east-1:123456789012:ses-events"
	certPath  = "/SimpleNotificationService-test.pem"
)

var (
	keysOnce         sync.Once
	testKey, altKey  *rsa.PrivateKey
	errKeyGeneration error
)

// keys returns two RSA keys, generated once per test binary.
func keys(t testing.TB) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	keysOnce.Do(func() {
		if testKey, errKeyGeneration = rsa.GenerateKey(rand.Reader, 2048); errKeyGeneration != nil {
			return
		}
		altKey, errKeyGeneration = rsa.GenerateKey(rand.Reader, 2048)
	})
	if errKeyGeneration != nil {
		t.Fatalf("generate keys: %v", errKeyGeneration)
	}
	return testKey, altKey
}

// fakeSNS is a local TLS server standing in for sns.<region>.amazonaws.com: it serves signing
// certificates and answers ConfirmSubscription, counting both.
type fakeSNS struct {
	t           testing.TB
	srv         *httptest.Server
	key, alt    *rsa.PrivateKey
	certHits    atomic.Int64
	confirmHits atomic.Int64
	// confirmStatus is what ConfirmSubscription answers (200 when zero).
	confirmStatus atomic.Int32
	lastConfirm   atomic.Value // url.Values
}

func newFakeSNS(t testing.TB) *fakeSNS {
	t.Helper()
	key, alt := keys(t)
	now := time.Now()
	pemFor := func(k *rsa.PrivateKey, from, to time.Time) []byte {
		b, err := selfSignedCertPEM(k, from, to)
		if err != nil {
			t.Fatalf("selfSignedCertPEM: %v", err)
		}
		return b
	}
	valid := pemFor(key, now.Add(-time.Hour), now.Add(24*time.Hour))
	other := pemFor(alt, now.Add(-time.Hour), now.Add(24*time.Hour))
	expired := pemFor(key, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	future := pemFor(key, now.Add(24*time.Hour), now.Add(48*time.Hour))

	f := &fakeSNS{t: t, key: key, alt: alt}
	mux := http.NewServeMux()
	serve := func(path string, body []byte) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			f.certHits.Add(1)
			_, _ = w.Write(body)
		})
	}
	serve(certPath, valid)
	serve("/other.pem", other)
	serve("/expired.pem", expired)
	serve("/future.pem", future)
	serve("/garbage.pem", []byte("not a certificate"))
	serve("/huge.pem", []byte(strings.Repeat("A", MaxCertBytes+10)))
	mux.HandleFunc("/missing.pem", func(w http.ResponseWriter, r *http.Request) {
		f.certHits.Add(1)
		http.NotFound(w, r)
	})
	mux.HandleFunc("/broken.pem", func(w http.ResponseWriter, r *http.Request) {
		f.certHits.Add(1)
		http.Error(w, "try later", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/redirect.pem", func(w http.ResponseWriter, r *http.Request) {
		f.certHits.Add(1)
		http.Redirect(w, r, certPath, http.StatusFound)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("Action") != "ConfirmSubscription" {
			http.NotFound(w, r)
			return
		}
		f.confirmHits.Add(1)
		f.lastConfirm.Store(r.URL.Query())
		if st := f.confirmStatus.Load(); st != 0 {
			w.WriteHeader(int(st))
			return
		}
		_, _ = w.Write([]byte(`<ConfirmSubscriptionResponse><ConfirmSubscriptionResult><SubscriptionArn>` +
			testTopic + `:2bcfbf39</SubscriptionArn></ConfirmSubscriptionResult></ConfirmSubscriptionResponse>`))
	})
	f.srv = httptest.NewTLSServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// url is a URL on the fake server (host 127.0.0.1).
func (f *fakeSNS) url(path string) string { return f.srv.URL + path }

// settings are endpoint settings that trust the fake server.
func (f *fakeSNS) settings() provider.Settings {
	return provider.Settings{
		TopicARNs:       []string{testTopic},
		CertHostPattern: `127\.0\.0\.1`,
		HTTPClient:      f.srv.Client(),
	}
}

func (f *fakeSNS) adapter(mods ...func(*provider.Settings)) *Adapter {
	f.t.Helper()
	s := f.settings()
	for _, m := range mods {
		m(&s)
	}
	a, err := New(s)
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	return a.(*Adapter)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// notification is an unsigned Notification envelope carrying message.
func (f *fakeSNS) notification(message string) Envelope {
	return Envelope{
		Type:           TypeNotification,
		MessageID:      "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
		TopicARN:       testTopic,
		Message:        message,
		Timestamp:      stamp(time.Now()),
		SigningCertURL: f.url(certPath),
		UnsubscribeURL: f.url("/?Action=Unsubscribe&SubscriptionArn=" + testTopic + ":c9135db0"),
	}
}

// confirmation is an unsigned SubscriptionConfirmation or UnsubscribeConfirmation envelope.
func (f *fakeSNS) confirmation(typ string) Envelope {
	token := "2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb71854e285d6ad02428b09ceece29417f1f02d609c582afbacc99c583a916b9981dd2728f4ae6fdb82efd087cc3b7849e05798d2d2785c03b0879594eeac82c01f235d0e717736"
	return Envelope{
		Type:           typ,
		MessageID:      "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
		Token:          token,
		TopicARN:       testTopic,
		Message:        "You have chosen to subscribe to the topic " + testTopic + ".\nTo confirm the subscription, visit the SubscribeURL included in this message.",
		SubscribeURL:   f.url("/?Action=ConfirmSubscription&TopicArn=" + testTopic + "&Token=" + token),
		Timestamp:      stamp(time.Now()),
		SigningCertURL: f.url(certPath),
	}
}

func sign(t testing.TB, env Envelope, key *rsa.PrivateKey, version string) Envelope {
	t.Helper()
	if err := signEnvelope(&env, key, version); err != nil {
		t.Fatalf("signEnvelope: %v", err)
	}
	return env
}

// request builds the request SNS would send for env.
func request(env Envelope) provider.Request {
	return requestBody(env.Type, env.Body())
}

func requestBody(typ string, body []byte) provider.Request {
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=UTF-8")
	if typ != "" {
		h.Set(MessageTypeHeader, typ)
	}
	return provider.Request{Header: h, Body: body, RemoteIP: "192.0.2.10", Now: time.Now()}
}

func TestRegistered(t *testing.T) {
	a, err := provider.New(Name, provider.Settings{TopicARNs: []string{testTopic}})
	if err != nil {
		t.Fatalf("provider.New(%q): %v", Name, err)
	}
	if _, ok := a.(provider.Controller); !ok {
		t.Fatalf("%T does not implement provider.Controller", a)
	}
	if provider.NeedsSecrets(Name) {
		t.Fatal("ses must be registered WithoutSecrets")
	}
}

func TestNewRejectsBadSettings(t *testing.T) {
	base := func() provider.Settings { return provider.Settings{TopicARNs: []string{testTopic}} }
	for name, tc := range map[string]struct {
		mod  func(*provider.Settings)
		want string
	}{
		"no topics":          {func(s *provider.Settings) { s.TopicARNs = nil }, "topic_arns"},
		"empty topic":        {func(s *provider.Settings) { s.TopicARNs = []string{testTopic, " "} }, "topic_arns[1]"},
		"not an arn":         {func(s *provider.Settings) { s.TopicARNs = []string{"ses-events"} }, "topic_arns[0]"},
		"padded arn":         {func(s *provider.Settings) { s.TopicARNs = []string{testTopic + " "} }, "topic_arns[0]"},
		"secrets":            {func(s *provider.Settings) { s.Secrets = []string{"x"} }, "secrets"},
		"generic":            {func(s *provider.Settings) { s.Generic = &provider.Generic{} }, "generic"},
		"bad pattern":        {func(s *provider.Settings) { s.CertHostPattern = "(" }, "cert_host_pattern"},
		"negative tolerance": {func(s *provider.Settings) { s.Tolerance = -time.Second }, "tolerance"},
		"short tolerance":    {func(s *provider.Settings) { s.Tolerance = 5 * time.Minute }, "tolerance"},
		"bad cidr":           {func(s *provider.Settings) { s.AllowCIDRs = []string{"10.0.0.0/8", "nope"} }, "allow_cidrs[1]"},
	} {
		t.Run(name, func(t *testing.T) {
			s := base()
			tc.mod(&s)
			_, err := New(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: err = %v, want one naming %q", err, tc.want)
			}
		})
	}
	for name, mod := range map[string]func(*provider.Settings){
		"defaults":        func(*provider.Settings) {},
		"tolerance 1h":    func(s *provider.Settings) { s.Tolerance = time.Hour },
		"cidrs and an ip": func(s *provider.Settings) { s.AllowCIDRs = []string{"54.240.0.0/18", "2001:db8::1"} },
		"china pattern":   func(s *provider.Settings) { s.CertHostPattern = `sns\.cn-north-1\.amazonaws\.com\.cn` },
	} {
		t.Run(name, func(t *testing.T) {
			s := base()
			mod(&s)
			if _, err := New(s); err != nil {
				t.Fatalf("New: %v", err)
			}
		})
	}
}

func TestDefaultCertHostPattern(t *testing.T) {
	a, err := New(provider.Settings{TopicARNs: []string{testTopic}})
	if err != nil {
		t.Fatal(err)
	}
	ad := a.(*Adapter)
	for host, want := range map[string]bool{
		"sns.us-east-1.amazonaws.com":             true,
		"sns.eu-central-1.amazonaws.com":          true,
		"sns.ap-southeast-2.amazonaws.com":        true,
		"sns.us-gov-west-1.amazonaws.com":         true,
		"sns.cn-northwest-1.amazonaws.com.cn":     true,
		"SNS.US-EAST-1.AMAZONAWS.COM":             true, // host names are case-insensitive
		"sns.us-east-1.amazonaws.com:443":         true, // the port is not part of the host name
		"sns.s3.amazonaws.com":                    false,
		"sns.s3-us-west-2.amazonaws.com":          false,
		"sns.s3-external-1.amazonaws.com":         false,
		"s3.amazonaws.com":                        false,
		"sns.amazonaws.com":                       false,
		"sns.us-east-1.amazonaws.com.attacker.io": false,
		"attacker.io":                             false,
		"sns.us-east-1.amazonaws.co":              false,
		"xsns.us-east-1.amazonaws.com":            false,
	} {
		_, err := ad.checkURL("https://"+host+"/SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem", true)
		if (err == nil) != want {
			t.Errorf("%s: allowed = %v, want %v (err %v)", host, err == nil, want, err)
		}
	}
	// A configured pattern is anchored: it must match the whole host name.
	b, err := New(provider.Settings{TopicARNs: []string{testTopic}, CertHostPattern: `sns\.us-east-1\.amazonaws\.com`})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.(*Adapter).checkURL("https://sns.us-east-1.amazonaws.com.attacker.io/x.pem", true); err == nil {
		t.Error("an unanchored configured pattern matched a longer host")
	}
}

func TestVerifyAccepts(t *testing.T) {
	f := newFakeSNS(t)
	a := f.adapter()
	withSubject := f.notification(`{"eventType":"Send"}`)
	withSubject.Subject = "Amazon SES Email Event Notification"
	multiline := f.notification("line one\nline two \"quoted\" \u00e9\u2028")
	for name, env := range map[string]Envelope{
		"notification v1":   sign(t, f.notification(`{"eventType":"Send"}`), f.key, SignatureVersion1),
		"notification v2":   sign(t, f.notification(`{"eventType":"Send"}`), f.key, SignatureVersion2),
		"with subject v1":   sign(t, withSubject, f.key, SignatureVersion1),
		"with subject v2":   sign(t, withSubject, f.key, SignatureVersion2),
		"escaped message":   sign(t, multiline, f.key, SignatureVersion2),
		"subscription v1":   sign(t, f.confirmation(TypeSubscriptionConfirmation), f.key, SignatureVersion1),
		"subscription v2":   sign(t, f.confirmation(TypeSubscriptionConfirmation), f.key, SignatureVersion2),
		"unsubscribe v1":    sign(t, f.confirmation(TypeUnsubscribeConfirmation), f.key, SignatureVersion1),
		"unsubscribe v2":    sign(t, f.confirmation(TypeUnsubscribeConfirmation), f.key, SignatureVersion2),
		"setup notice (v1)": sign(t, f.notification(SetupNotice), f.key, SignatureVersion1),
	} {
		t.Run(name, func(t *testing.T) {
			if err := a.Verify(request(env)); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
	t.Run("topic header that matches", func(t *testing.T) {
		r := request(sign(t, f.notification(`{}`), f.key, SignatureVersion2))
		r.Header.Set(TopicARNHeader, testTopic)
		if err := a.Verify(r); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})
	t.Run("empty subject is signed when present", func(t *testing.T) {
		// SNS signs Subject whenever the key is present; build such a body by hand.
		env := f.notification(`{}`)
		env.hasSubject = true
		env = sign(t, env, f.key, SignatureVersion2)
		body := strings.Replace(string(env.Body()), `"Message":`, `"Subject":"","Message":`, 1)
		if err := a.Verify(requestBody(TypeNotification, []byte(body))); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})
}

func TestVerifyRejects(t *testing.T) {
	f := newFakeSNS(t)
	good := func() Envelope { return f.notification(`{"eventType":"Send"}`) }
	signed := func(mod func(*Envelope)) provider.Request {
		env := good()
		mod(&env)
		return request(sign(t, env, f.key, SignatureVersion2))
	}
	tamper := func(mod func(*Envelope)) provider.Request {
		env := sign(t, good(), f.key, SignatureVersion2)
		mod(&env)
		return request(env)
	}
	body := func(typ, b string) provider.Request { return requestBody(typ, []byte(b)) }
	validBody := string(sign(t, good(), f.key, SignatureVersion1).Body())

	cases := map[string]struct {
		req  provider.Request
		want error
		// fetches is whether the certificate URL may be requested.
		fetches bool
	}{
		"tampered Message":       {tamper(func(e *Envelope) { e.Message = `{"eventType":"Bounce"}` }), ErrSignature, true},
		"tampered MessageId":     {tamper(func(e *Envelope) { e.MessageID = "other" }), ErrSignature, true},
		"tampered Timestamp":     {tamper(func(e *Envelope) { e.Timestamp = stamp(time.Now().Add(time.Second)) }), ErrSignature, true},
		"added Subject":          {tamper(func(e *Envelope) { e.Subject = "hi" }), ErrSignature, true},
		"version swapped":        {tamper(func(e *Envelope) { e.SignatureVersion = SignatureVersion1 }), ErrSignature, true},
		"signed by another key":  {request(sign(t, good(), f.alt, SignatureVersion2)), ErrSignature, true},
		"other key's cert":       {signed(func(e *Envelope) { e.SigningCertURL = f.url("/other.pem") }), ErrSignature, true},
		"signature not base64":   {tamper(func(e *Envelope) { e.Signature = "!!!" }), ErrSignature, false},
		"topic not allowed":      {signed(func(e *Envelope) { e.TopicARN = "arn:aws:sns:us-east-1:999999999999:other" }), ErrTopicNotAllowed, false},
		"topic header differs":   {withHeader(signed(func(*Envelope) {}), TopicARNHeader, "arn:aws:sns:us-east-1:999999999999:other"), ErrTopicNotAllowed, false},
		"version 3":              {tamper(func(e *Envelope) { e.SignatureVersion = "3" }), ErrSignatureVersion, false},
		"version empty":          {tamper(func(e *Envelope) { e.SignatureVersion = "" }), ErrMalformed, false},
		"header missing":         {withHeader(signed(func(*Envelope) {}), MessageTypeHeader, ""), ErrMessageType, false},
		"header mismatch":        {withHeader(signed(func(*Envelope) {}), MessageTypeHeader, TypeSubscriptionConfirmation), ErrMessageType, false},
		"unknown type":           {body("Foo", strings.Replace(validBody, `"Type":"Notification"`, `"Type":"Foo"`, 1)), ErrMalformed, false},
		"cert host not allowed":  {signed(func(e *Envelope) { e.SigningCertURL = strings.Replace(f.url(certPath), "127.0.0.1", "localhost", 1) }), ErrCertURL, false},
		"cert over http":         {signed(func(e *Envelope) { e.SigningCertURL = strings.Replace(f.url(certPath), "https://", "http://", 1) }), ErrCertURL, false},
		"cert path not .pem":     {signed(func(e *Envelope) { e.SigningCertURL = f.url("/SimpleNotificationService-test.crt") }), ErrCertURL, false},
		"cert URL with query":    {signed(func(e *Envelope) { e.SigningCertURL = f.url(certPath + "?x=.pem") }), ErrCertURL, false},
		"cert URL with userinfo": {signed(func(e *Envelope) { e.SigningCertURL = strings.Replace(f.url(certPath), "https://", "https://u:p@", 1) }), ErrCertURL, false},
		"cert URL not a URL":     {signed(func(e *Envelope) { e.SigningCertURL = "::" }), ErrCertURL, false},
		"cert expired":           {signed(func(e *Envelope) { e.SigningCertURL = f.url("/expired.pem") }), ErrCertificate, true},
		"cert not yet valid":     {signed(func(e *Envelope) { e.SigningCertURL = f.url("/future.pem") }), ErrCertificate, true},
		"cert not PEM":           {signed(func(e *Envelope) { e.SigningCertURL = f.url("/garbage.pem") }), ErrCertificate, true},
		"cert too large":         {signed(func(e *Envelope) { e.SigningCertURL = f.url("/huge.pem") }), ErrCertificate, true},
		"cert 404":               {signed(func(e *Envelope) { e.SigningCertURL = f.url("/missing.pem") }), ErrCertificate, true},
		"cert redirect":          {signed(func(e *Envelope) { e.SigningCertURL = f.url("/redirect.pem") }), ErrCertificate, true},
		"not JSON":               {body(TypeNotification, "Type=Notification"), ErrMalformed, false},
		"JSON array":             {body(TypeNotification, "[]"), ErrMalformed, false},
		"trailing data":          {body(TypeNotification, validBody+"{}"), ErrMalformed, false},
		"duplicate key":          {body(TypeNotification, strings.Replace(validBody, `{`, `{"Message":"{}",`, 1)), ErrMalformed, false},
		"case-variant key":       {body(TypeNotification, strings.Replace(validBody, `{`, `{"subject":"x",`, 1)), ErrMalformed, false},
		"non-string field":       {body(TypeNotification, strings.Replace(validBody, `"MessageId":"22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324"`, `"MessageId":42`, 1)), ErrMalformed, false},
		"missing Signature":      {tamper(func(e *Envelope) { e.Signature = "" }), ErrMalformed, false},
		"missing SigningCertURL": {tamper(func(e *Envelope) { e.SigningCertURL = "" }), ErrMalformed, false},
		"confirmation no Token": {func() provider.Request {
			env := f.confirmation(TypeSubscriptionConfirmation)
			env.Token = ""
			return request(sign(t, env, f.key, SignatureVersion2))
		}(), ErrMalformed, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := f.adapter()
			before := f.certHits.Load()
			err := a.Verify(tc.req)
			if !errors.Is(err, provider.ErrUnauthorized) || !errors.Is(err, tc.want) {
				t.Fatalf("Verify: err = %v, want provider.ErrUnauthorized and %v", err, tc.want)
			}
			if !tc.fetches && f.certHits.Load() != before {
				t.Errorf("the certificate was fetched for a request rejected before that step")
			}
		})
	}
}

func withHeader(r provider.Request, k, v string) provider.Request {
	r.Header = r.Header.Clone()
	if v == "" {
		r.Header.Del(k)
	} else {
		r.Header.Set(k, v)
	}
	return r
}

func TestVerifyTransientCertFailureIsNotUnauthorized(t *testing.T) {
	f := newFakeSNS(t)
	a := f.adapter()
	env := f.notification(`{}`)
	env.SigningCertURL = f.url("/broken.pem")
	err := a.Verify(request(sign(t, env, f.key, SignatureVersion1)))
	if !errors.Is(err, ErrCertUnavailable) || errors.Is(err, provider.ErrUnauthorized) {
		t.Fatalf("cert 503: err = %v, want ErrCertUnavailable without ErrUnauthorized", err)
	}

	// A server that is not there: a network error, also retryable.
	dead := httptest.NewTLSServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	env.SigningCertURL = deadURL + certPath
	err = a.Verify(request(sign(t, env, f.key, SignatureVersion1)))
	if !errors.Is(err, ErrCertUnavailable) || errors.Is(err, provider.ErrUnauthorized) {
		t.Fatalf("dead server: err = %v, want ErrCertUnavailable without ErrUnauthorized", err)
	}
	if a.certs.len() != 0 {
		t.Fatal("a failed fetch was cached as a certificate")
	}
}

func TestVerifyTolerance(t *testing.T) {
	f := newFakeSNS(t)
	old := f.notification(`{}`)
	old.Timestamp = stamp(time.Now().Add(-3 * time.Hour))
	req := request(sign(t, old, f.key, SignatureVersion2))

	// Off by default: SNS retries keep the original Timestamp.
	if err := f.adapter().Verify(req); err != nil {
		t.Fatalf("default tolerance: Verify: %v", err)
	}
	a := f.adapter(func(s *provider.Settings) { s.Tolerance = 2 * time.Hour })
	if err := a.Verify(req); !errors.Is(err, ErrTimestamp) || !errors.Is(err, provider.ErrUnauthorized) {
		t.Fatalf("3h old with 2h tolerance: err = %v, want ErrTimestamp", err)
	}
	recent := f.notification(`{}`)
	recent.Timestamp = stamp(time.Now().Add(-90 * time.Minute))
	if err := a.Verify(request(sign(t, recent, f.key, SignatureVersion2))); err != nil {
		t.Fatalf("90m old with 2h tolerance: %v", err)
	}
	future := f.notification(`{}`)
	future.Timestamp = stamp(time.Now().Add(3 * time.Hour))
	if err := a.Verify(request(sign(t, future, f.key, SignatureVersion2))); !errors.Is(err, ErrTimestamp) {
		t.Fatalf("3h in the future: err = %v, want ErrTimestamp", err)
	}
	garbled := f.notification(`{}`)
	garbled.Timestamp = "yesterday"
	if err := a.Verify(request(sign(t, garbled, f.key, SignatureVersion2))); !errors.Is(err, ErrTimestamp) {
		t.Fatalf("unparsable Timestamp: err = %v, want ErrTimestamp", err)
	}
}

func TestVerifyAllowCIDRs(t *testing.T) {
	f := newFakeSNS(t)
	a := f.adapter(func(s *provider.Settings) { s.AllowCIDRs = []string{"192.0.2.0/24", "2001:db8::/32"} })
	env := sign(t, f.notification(`{}`), f.key, SignatureVersion2)
	for ip, ok := range map[string]bool{
		"192.0.2.10": true, "::ffff:192.0.2.10": true, "2001:db8::7": true,
		"198.51.100.1": false, "": false, "garbage": false,
	} {
		r := request(env)
		r.RemoteIP = ip
		err := a.Verify(r)
		if ok && err != nil {
			t.Errorf("%q: Verify: %v", ip, err)
		}
		if !ok && !errors.Is(err, ErrSourceAddress) {
			t.Errorf("%q: err = %v, want ErrSourceAddress", ip, err)
		}
	}
}

func TestCertCache(t *testing.T) {
	f := newFakeSNS(t)
	a := f.adapter()
	for i, v := range []string{SignatureVersion1, SignatureVersion2, SignatureVersion1} {
		env := f.notification(fmt.Sprintf(`{"n":%d}`, i))
		if err := a.Verify(request(sign(t, env, f.key, v))); err != nil {
			t.Fatalf("Verify %d: %v", i, err)
		}
	}
	if n := f.certHits.Load(); n != 1 {
		t.Fatalf("certificate fetched %d times for three messages, want 1", n)
	}

	t.Run("concurrent first use fetches once", func(t *testing.T) {
		g := newFakeSNS(t)
		b := g.adapter()
		req := request(sign(t, g.notification(`{}`), g.key, SignatureVersion2))
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for range 32 {
			wg.Go(func() { errs <- b.Verify(req) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
		}
		if n := g.certHits.Load(); n != 1 {
			t.Fatalf("certificate fetched %d times by 32 concurrent requests, want 1", n)
		}
	})

	t.Run("bounded", func(t *testing.T) {
		c := newCertCache(CertCacheSize)
		cert, err := parseCertPEM(mustPEM(t))
		if err != nil {
			t.Fatal(err)
		}
		for i := range CertCacheSize + 10 {
			c.put(fmt.Sprintf("https://sns.us-east-1.amazonaws.com/%d.pem", i), cert)
		}
		if c.len() != CertCacheSize {
			t.Fatalf("cache holds %d certificates, want %d", c.len(), CertCacheSize)
		}
		if _, ok := c.entries["https://sns.us-east-1.amazonaws.com/0.pem"]; ok {
			t.Fatal("the oldest entry was not evicted")
		}
		c.remove("https://sns.us-east-1.amazonaws.com/20.pem")
		if c.len() != CertCacheSize-1 || len(c.order) != CertCacheSize-1 {
			t.Fatalf("remove: len %d, order %d", c.len(), len(c.order))
		}
	})

	t.Run("expired cached certificate is fetched again", func(t *testing.T) {
		g := newFakeSNS(t)
		b := g.adapter()
		url := g.url(certPath)
		expired, err := parseCertPEM(mustPEMValid(t, g.key, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)))
		if err != nil {
			t.Fatal(err)
		}
		b.certs.put(url, expired)
		if err := b.Verify(request(sign(t, g.notification(`{}`), g.key, SignatureVersion2))); err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if g.certHits.Load() != 1 {
			t.Fatalf("certificate fetched %d times, want 1 (replacing the expired one)", g.certHits.Load())
		}
	})
}

func mustPEM(t testing.TB) []byte {
	k, _ := keys(t)
	return mustPEMValid(t, k, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

func mustPEMValid(t testing.TB, k *rsa.PrivateKey, from, to time.Time) []byte {
	t.Helper()
	b, err := selfSignedCertPEM(k, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestControlSubscriptionConfirmation(t *testing.T) {
	f := newFakeSNS(t)
	a := f.adapter()
	env := sign(t, f.confirmation(TypeSubscriptionConfirmation), f.key, SignatureVersion1)
	req := request(env)
	if err := a.Verify(req); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	handled, status, err := a.Control(req)
	if err != nil || !handled || status != StatusSubscribed {
		t.Fatalf("Control = %v, %q, %v; want true, %q, nil", handled, status, err, StatusSubscribed)
	}
	if n := f.confirmHits.Load(); n != 1 {
		t.Fatalf("SubscribeURL fetched %d times, want 1", n)
	}
	q, _ := f.lastConfirm.Load().(url.Values)
	if q.Get("Token") != env.Token || q.Get("TopicArn") != testTopic {
		t.Fatalf("confirmation query = %v", q)
	}
	// Parse is not meant for a confirmation.
	if _, err := a.Parse(req); !errors.Is(err, provider.ErrBadRequest) {
		t.Fatalf("Parse(confirmation): err = %v, want ErrBadRequest", err)
	}
}

func TestControlConfirmationFailures(t *testing.T) {
	f := newFakeSNS(t)
	a := f.adapter()

	t.Run("SubscribeURL answers 500: retryable", func(t *testing.T) {
		f.confirmStatus.Store(http.StatusInternalServerError)
		defer f.confirmStatus.Store(0)
		_, _, err := a.Control(request(sign(t, f.confirmation(TypeSubscriptionConfirmation), f.key, SignatureVersion2)))
		if err == nil || errors.Is(err, provider.ErrBadRequest) || errors.Is(err, provider.ErrUnauthorized) {
			t.Fatalf("err = %v, want a plain (503) error", err)
		}
	})
	t.Run("SubscribeURL unreachable: retryable", func(t *testing.T) {
		dead := httptest.NewTLSServer(http.NotFoundHandler())
		deadURL := dead.URL
		dead.Close()
		env := f.confirmation(TypeSubscriptionConfirmation)
		env.SubscribeURL = deadURL + "/?Action=ConfirmSubscription&TopicArn=" + testTopic + "&Token=x"
		_, _, err := a.Control(request(sign(t, env, f.key, SignatureVersion2)))
		if err == nil || errors.Is(err, provider.ErrBadRequest) {
			t.Fatalf("err = %v, want a plain (503) error", err)
		}
	})
	for name, u := range map[string]string{
		"other host":  strings.Replace(f.url("/?Action=ConfirmSubscription&TopicArn="+testTopic), "127.0.0.1", "localhost", 1),
		"http":        strings.Replace(f.url("/?Action=ConfirmSubscription&TopicArn="+testTopic), "https://", "http://", 1),
		"not confirm": f.url("/?Action=Unsubscribe&TopicArn=" + testTopic),
		"other topic": f.url("/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:us-east-1:999999999999:other"),
	} {
		t.Run(name, func(t *testing.T) {
			env := f.confirmation(TypeSubscriptionConfirmation)
			env.SubscribeURL = u
			before := f.confirmHits.Load()
			handled, _, err := a.Control(request(sign(t, env, f.key, SignatureVersion2)))
			if handled || !errors.Is(err, provider.ErrBadRequest) {
				t.Fatalf("Control = %v, %v; want ErrBadRequest", handled, err)
			}
			if f.confirmHits.Load() != before {
				t.Fatal("a disallowed SubscribeURL was fetched")
			}
		})
	}
}

func TestControlUnsubscribeConfirmation(t *testing.T) {
	f := newFakeSNS(t)
	a := f.adapter()
	req := request(sign(t, f.confirmation(TypeUnsubscribeConfirmation), f.key, SignatureVersion2))
	if err := a.Verify(req); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	handled, status, err := a.Control(req)
	if err != nil || !handled || status != StatusUnsubscribed {
		t.Fatalf("Control = %v, %q, %v; want true, %q, nil", handled, status, err, StatusUnsubscribed)
	}
	if f.confirmHits.Load() != 0 {
		t.Fatal("an UnsubscribeConfirmation re-subscribed")
	}
}

func TestControlNotification(t *testing.T) {
	f := newFakeSNS(t)
	a := f.adapter()
	handled, _, err := a.Control(request(sign(t, f.notification(`{"eventType":"Send"}`), f.key, SignatureVersion2)))
	if err != nil || handled {
		t.Fatalf("Control(Notification) = %v, %v; want not handled", handled, err)
	}
	handled, status, err := a.Control(request(sign(t, f.notification(SetupNotice), f.key, SignatureVersion2)))
	if err != nil || !handled || status != StatusIgnored {
		t.Fatalf("Control(setup notice) = %v, %q, %v; want true, %q", handled, status, err, StatusIgnored)
	}
	if _, _, err := a.Control(requestBody(TypeNotification, []byte("nope"))); !errors.Is(err, provider.ErrBadRequest) {
		t.Fatalf("Control(garbage): err = %v, want ErrBadRequest", err)
	}
}

func TestSignEnvelopeRejects(t *testing.T) {
	k, _ := keys(t)
	env := Envelope{Type: TypeNotification, MessageID: "m", TopicARN: testTopic, Message: "x", Timestamp: "t"}
	if err := signEnvelope(&env, k, "3"); err == nil {
		t.Error("version 3 accepted")
	}
	if err := signEnvelope(&env, nil, SignatureVersion1); err == nil {
		t.Error("nil key accepted")
	}
	bad := env
	bad.Type = "Other"
	if err := signEnvelope(&bad, k, SignatureVersion1); err == nil {
		t.Error("unknown Type accepted")
	}
}

// TestStringToSign pins the canonical strings to the examples in the SNS developer guide.
func TestStringToSign(t *testing.T) {
	n := Envelope{
		Type: TypeNotification, MessageID: "4d4dc071-ddbf-465d-bba8-08f81c89da64", Subject: "My subject",
		Message: "My Test Message", Timestamp: "2019-01-31T04:37:04.321Z",
		TopicARN: "arn:aws:sns:us-east-2:123456789012:s4-MySNSTopic-1G1WEFCOXTC0P",
	}
	got, err := stringToSign(&n)
	if err != nil {
		t.Fatal(err)
	}
	want := "Message\nMy Test Message\nMessageId\n4d4dc071-ddbf-465d-bba8-08f81c89da64\nSubject\nMy subject\n" +
		"Timestamp\n2019-01-31T04:37:04.321Z\nTopicArn\narn:aws:sns:us-east-2:123456789012:s4-MySNSTopic-1G1WEFCOXTC0P\nType\nNotification\n"
	if got != want {
		t.Errorf("Notification:\n got %q\nwant %q", got, want)
	}
	c := Envelope{
		Type: TypeSubscriptionConfirmation, MessageID: "3d891288-136d-417f-bc05-901c108273ee", Message: "My Test Message",
		SubscribeURL: "https://sns.us-east-2.amazonaws.com/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:us-east-2:123456789012:s4-MySNSTopic-1G1WEFCOXTC0P&Token=233...",
		Timestamp:    "2019-01-31T19:25:13.719Z", Token: "233...",
		TopicARN: "arn:aws:sns:us-east-2:123456789012:s4-MySNSTopic-1G1WEFCOXTC0P",
	}
	got, err = stringToSign(&c)
	if err != nil {
		t.Fatal(err)
	}
	want = "Message\nMy Test Message\nMessageId\n3d891288-136d-417f-bc05-901c108273ee\nSubscribeURL\n" + c.SubscribeURL +
		"\nTimestamp\n2019-01-31T19:25:13.719Z\nToken\n233...\nTopicArn\n" + c.TopicARN + "\nType\nSubscriptionConfirmation\n"
	if got != want {
		t.Errorf("SubscriptionConfirmation:\n got %q\nwant %q", got, want)
	}
}
