package httpsink

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/signature"
)

const (
	testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testID     = "ntf_01HZX5"
)

var (
	testNow  = time.Unix(1700000000, 0)
	testBody = []byte(`{"type":"message.delivered","message_id":"msg_1"}`)
)

// receiver is a sink that verifies each request the way a Standard Webhooks consumer would.
func receiver(t *testing.T, respond http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("sink: read body: %v", err)
		}
		h := r.Header
		scheme, err := signature.NewStandard(testSecret, 5*time.Minute)
		if err != nil {
			t.Errorf("sink: %v", err)
			return
		}
		if err := scheme.Verify(h.Get("webhook-id"), h.Get("webhook-timestamp"),
			h.Get("webhook-signature"), body, testNow); err != nil {
			t.Errorf("sink: signature does not verify: %v", err)
		}
		if r.Method != http.MethodPost {
			t.Errorf("sink: method %s", r.Method)
		}
		for k, want := range map[string]string{
			"Content-Type":      "application/json",
			"Idempotency-Key":   testID,
			"Webhook-Id":        testID,
			"Webhook-Timestamp": "1700000000",
			"User-Agent":        "mailhook",
		} {
			if got := h.Get(k); got != want {
				t.Errorf("sink: %s = %q, want %q", k, got, want)
			}
		}
		if !bytes.Equal(body, testBody) {
			t.Errorf("sink: body = %q", body)
		}
		respond(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func status(code int, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	}
}

func TestSendSuccess(t *testing.T) {
	for _, code := range []int{200, 201, 202, 204} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			srv, hits := receiver(t, status(code))
			got, err := (&Sender{}).Send(context.Background(), srv.URL, testSecret, notify.Message{ID: testID, Body: testBody}, testNow)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if got != code {
				t.Errorf("Send says the sink answered %d, want %d", got, code)
			}
			if hits.Load() != 1 {
				t.Fatalf("sink hit %d times", hits.Load())
			}
		})
	}
}

func TestSendStatusClasses(t *testing.T) {
	tests := []struct {
		code       int
		header     []string
		retryable  bool
		retryAfter time.Duration
	}{
		{code: 301, header: []string{"Location", "/elsewhere"}},
		{code: 302, header: []string{"Location", "/elsewhere"}},
		{code: 307, header: []string{"Location", "/elsewhere"}},
		{code: 400},
		{code: 401},
		{code: 403},
		{code: 404},
		{code: 410},
		{code: 422},
		{code: 408, retryable: true},
		{code: 429, header: []string{"Retry-After", "7"}, retryable: true, retryAfter: 7 * time.Second},
		{code: 429, header: []string{"Retry-After", "soon"}, retryable: true},
		{code: 500, retryable: true},
		{code: 502, retryable: true},
		{code: 503, header: []string{"Retry-After", testNow.Add(90 * time.Second).UTC().Format(http.TimeFormat)}, retryable: true, retryAfter: 90 * time.Second},
		{code: 504, retryable: true},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.code), func(t *testing.T) {
			srv, hits := receiver(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/elsewhere" {
					t.Errorf("redirect was followed")
				}
				status(tt.code, tt.header...)(w, r)
			})
			_, err := (&Sender{}).Send(context.Background(), srv.URL, testSecret, notify.Message{ID: testID, Body: testBody}, testNow)
			var de *notify.DeliveryError
			if !errors.As(err, &de) {
				t.Fatalf("Send error = %v (%T), want *notify.DeliveryError", err, err)
			}
			if de.StatusCode != tt.code || de.Retryable != tt.retryable || de.RetryAfter != tt.retryAfter {
				t.Errorf("DeliveryError{StatusCode:%d Retryable:%v RetryAfter:%s}, want {%d %v %s}",
					de.StatusCode, de.Retryable, de.RetryAfter, tt.code, tt.retryable, tt.retryAfter)
			}
			if de.Body != http.StatusText(tt.code) {
				t.Errorf("Body = %q", de.Body)
			}
			if hits.Load() != 1 {
				t.Errorf("sink hit %d times", hits.Load())
			}
		})
	}
}

func TestSendTruncatesAndSanitizesBody(t *testing.T) {
	// 1 MiB: more than is ever drained, and a multi-byte rune straddles the 512-byte cut.
	payload := "\x00" + strings.Repeat("é", 1<<19)
	srv, _ := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, payload)
	})
	_, err := (&Sender{}).Send(context.Background(), srv.URL, testSecret, notify.Message{ID: testID, Body: testBody}, testNow)
	var de *notify.DeliveryError
	if !errors.As(err, &de) {
		t.Fatalf("Send error = %v", err)
	}
	if len(de.Body) > 512+len("\uFFFD") || len(de.Body) < 500 {
		t.Errorf("Body has %d bytes", len(de.Body))
	}
	if !utf8.ValidString(de.Body) || strings.ContainsRune(de.Body, 0) {
		t.Errorf("Body is not clean text: %q", de.Body[:16])
	}
}

func TestSendClientTimeoutIsRetryable(t *testing.T) {
	release := make(chan struct{})
	srv, _ := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close, so the handler returns

	s := &Sender{Client: &http.Client{Timeout: 50 * time.Millisecond}}
	_, err := s.Send(context.Background(), srv.URL+"/hook?token=s3cr3t", testSecret, notify.Message{ID: testID, Body: testBody}, testNow)
	var de *notify.DeliveryError
	if !errors.As(err, &de) {
		t.Fatalf("Send error = %v", err)
	}
	if !de.Retryable || de.StatusCode != 0 {
		t.Errorf("DeliveryError{StatusCode:%d Retryable:%v}, want {0 true}", de.StatusCode, de.Retryable)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("error %v is not a timeout", err)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error leaks the sink URL: %v", err)
	}
}

func TestSendContextDeadlineIsRetryable(t *testing.T) {
	release := make(chan struct{})
	srv, _ := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := (&Sender{}).Send(ctx, srv.URL, testSecret, notify.Message{ID: testID, Body: testBody}, testNow)
	var de *notify.DeliveryError
	if !errors.As(err, &de) || !de.Retryable {
		t.Fatalf("Send error = %v, want retryable DeliveryError", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
	}
}

func TestSendConnectionRefusedIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	_, err := (&Sender{}).Send(context.Background(), addr, testSecret, notify.Message{ID: testID, Body: testBody}, testNow)
	var de *notify.DeliveryError
	if !errors.As(err, &de) || !de.Retryable || de.StatusCode != 0 || de.Err == nil {
		t.Fatalf("Send error = %#v, want retryable network DeliveryError", err)
	}
}

func TestSendLocalProblemsAreNotRetryable(t *testing.T) {
	srv, hits := receiver(t, status(200))
	tests := map[string]struct{ url, secret, id string }{
		"unparseable URL": {"http://[::1", testSecret, testID},
		"ftp scheme":      {"ftp://example.com/x", testSecret, testID},
		"no host":         {"http:///path", testSecret, testID},
		"empty URL":       {"", testSecret, testID},
		"bad secret":      {srv.URL, "whsec_***", testID},
		"empty secret":    {srv.URL, "", testID},
		"empty id":        {srv.URL, testSecret, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := (&Sender{}).Send(context.Background(), tt.url, tt.secret, notify.Message{ID: tt.id, Body: testBody}, testNow)
			var de *notify.DeliveryError
			if !errors.As(err, &de) || de.Retryable || de.StatusCode != 0 {
				t.Fatalf("Send error = %v, want non-retryable DeliveryError", err)
			}
		})
	}
	if hits.Load() != 0 {
		t.Fatalf("sink hit %d times", hits.Load())
	}
}

func TestSendDoesNotModifyCallersClient(t *testing.T) {
	srv, _ := receiver(t, status(302, "Location", "/elsewhere"))
	c := &http.Client{Timeout: time.Second}
	_, _ = (&Sender{Client: c}).Send(context.Background(), srv.URL, testSecret, notify.Message{ID: testID, Body: testBody}, testNow)
	if c.CheckRedirect != nil {
		t.Fatal("Send set CheckRedirect on the caller's client")
	}
}

func TestRetryAfter(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"":                              0,
		"0":                             0,
		"-5":                            0,
		"120":                           2 * time.Minute,
		" 3 ":                           3 * time.Second,
		"99999999999999999":             time.Duration(1<<63 - 1),
		"1.5":                           0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0, // in the past
		testNow.Add(time.Hour).UTC().Format(http.TimeFormat): time.Hour,
	} {
		if got := retryAfter(v, testNow); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}
