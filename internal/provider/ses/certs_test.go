package ses

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/mailhook/mailhook/internal/provider"
)

// fakeClock is the certificate cache's clock in these tests: the failure TTL and the fetch
// limiter are exercised by moving it, not by sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// certHost stands in for sns.<region>.amazonaws.com serving the fake SNS key's certificate at
// every .pem path, so each test can name as many distinct certificate URLs as it likes. It
// counts requests per path; status, when set, is answered instead of the certificate.
type certHost struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hits   map[string]int
	total  atomic.Int64
	status atomic.Int32
}

func newCertHost(t *testing.T, f *fakeSNS) *certHost {
	t.Helper()
	pem := mustPEMValid(t, f.key, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	h := &certHost{hits: map[string]int{}}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.hits[r.URL.Path]++
		h.mu.Unlock()
		h.total.Add(1)
		if st := h.status.Load(); st != 0 {
			http.Error(w, "certificate host failing", int(st))
			return
		}
		_, _ = w.Write(pem)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *certHost) pathHits(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[path]
}

// adapter trusts the host and runs its certificate cache on clk.
func (h *certHost) adapter(t *testing.T, clk *fakeClock) *Adapter {
	t.Helper()
	a, err := New(provider.Settings{
		TopicARNs:       []string{testTopic},
		CertHostPattern: `127\.0\.0\.1`,
		HTTPClient:      h.srv.Client(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ad := a.(*Adapter)
	ad.certs.now = clk.Now
	return ad
}

// signedFor is a Notification correctly signed with f.key that names certURL.
func signedFor(t *testing.T, f *fakeSNS, certURL string) provider.Request {
	t.Helper()
	env := f.notification(`{"eventType":"Send"}`)
	env.SigningCertURL = certURL
	return request(sign(t, env, f.key, SignatureVersion2))
}

// countingTransport counts the requests the adapter sends, for a host that cannot count them
// itself because nothing is listening.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

func isRetryable(err error) bool {
	return errors.Is(err, ErrCertUnavailable) && !errors.Is(err, provider.ErrUnauthorized)
}

func isRefusal(err error) bool {
	return errors.Is(err, ErrCertificate) && errors.Is(err, provider.ErrUnauthorized)
}

// A failing certificate URL named twice in a row is fetched once, and the second request gets
// the same class of answer as the first: 503 for a failure a retry may fix, 401 for a
// certificate that is there but unacceptable.
func TestCertFailureRemembered(t *testing.T) {
	f := newFakeSNS(t)
	for _, tc := range []struct {
		path string
		want func(error) bool
	}{
		{"/broken.pem", isRetryable}, // 503
		{"/missing.pem", isRefusal},  // 404
		{"/garbage.pem", isRefusal},  // fetched, not a certificate
		{"/expired.pem", isRefusal},  // parses but expired: remembered, not cached
		{"/redirect.pem", isRefusal}, // 302, not followed
		{"/huge.pem", isRefusal},     // over MaxCertBytes
		{"/other.pem", nil},          // fetched fine; the signature is what fails
		{certPath, func(err error) bool { return err == nil }},
	} {
		t.Run(tc.path, func(t *testing.T) {
			a := f.adapter()
			a.certs.now = newFakeClock().Now
			req := signedFor(t, f, f.url(tc.path))
			before := f.certHits.Load()
			first := a.Verify(req)
			second := a.Verify(req)
			if n := f.certHits.Load() - before; n != 1 {
				t.Fatalf("certificate fetched %d times for two requests, want 1", n)
			}
			if tc.want == nil {
				if !errors.Is(first, ErrSignature) || !errors.Is(second, ErrSignature) {
					t.Fatalf("errs = %v, %v; want ErrSignature twice", first, second)
				}
				return
			}
			if !tc.want(first) || !tc.want(second) {
				t.Fatalf("errs = %v, %v; want the same class twice", first, second)
			}
		})
	}

	t.Run("network error", func(t *testing.T) {
		dead := httptest.NewTLSServer(http.NotFoundHandler())
		deadURL := dead.URL
		ct := &countingTransport{base: dead.Client().Transport}
		dead.Close()
		a, err := New(provider.Settings{
			TopicARNs:       []string{testTopic},
			CertHostPattern: `127\.0\.0\.1`,
			HTTPClient:      &http.Client{Transport: ct, Timeout: 5 * time.Second},
		})
		if err != nil {
			t.Fatal(err)
		}
		ad := a.(*Adapter)
		ad.certs.now = newFakeClock().Now
		req := signedFor(t, f, deadURL+certPath)
		for i := range 3 {
			if err := ad.Verify(req); !isRetryable(err) {
				t.Fatalf("request %d: err = %v, want ErrCertUnavailable without ErrUnauthorized", i, err)
			}
		}
		if n := ct.n.Load(); n != 1 {
			t.Fatalf("%d outbound requests for three deliveries, want 1", n)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		a := f.adapter()
		a.certs.now = newFakeClock().Now
		req := signedFor(t, f, f.url("/broken.pem"))
		before := f.certHits.Load()
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Go(func() { errs <- a.Verify(req) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if !isRetryable(err) {
				t.Fatalf("err = %v, want ErrCertUnavailable without ErrUnauthorized", err)
			}
		}
		if n := f.certHits.Load() - before; n != 1 {
			t.Fatalf("certificate fetched %d times by 16 concurrent requests, want 1", n)
		}
	})
}

// Once FailedCertTTL has passed, a remembered failure no longer answers: the URL is fetched
// again, and a certificate host that has recovered lets the retry through.
func TestCertFailureExpires(t *testing.T) {
	f := newFakeSNS(t)
	h := newCertHost(t, f)
	clk := newFakeClock()
	a := h.adapter(t, clk)
	req := signedFor(t, f, h.srv.URL+certPath)

	h.status.Store(http.StatusServiceUnavailable)
	if err := a.Verify(req); !isRetryable(err) {
		t.Fatalf("host failing: err = %v, want ErrCertUnavailable without ErrUnauthorized", err)
	}
	h.status.Store(0)
	for _, step := range []time.Duration{FailedCertTTL / 2, FailedCertTTL/2 - time.Millisecond} {
		clk.Advance(step)
		if err := a.Verify(req); !isRetryable(err) {
			t.Fatalf("within the TTL: err = %v, want the remembered ErrCertUnavailable", err)
		}
	}
	if n := h.pathHits(certPath); n != 1 {
		t.Fatalf("fetched %d times within FailedCertTTL, want 1", n)
	}
	clk.Advance(time.Millisecond)
	if err := a.Verify(req); err != nil {
		t.Fatalf("after the TTL, host recovered: Verify: %v", err)
	}
	if n := h.pathHits(certPath); n != 2 {
		t.Fatalf("fetched %d times after FailedCertTTL, want 2", n)
	}
	// Now cached: no further fetches.
	clk.Advance(time.Hour)
	if err := a.Verify(req); err != nil {
		t.Fatalf("cached: Verify: %v", err)
	}
	if n := h.pathHits(certPath); n != 2 {
		t.Fatalf("fetched %d times with the certificate cached, want 2", n)
	}
}

// A burst of requests naming distinct uncached certificate URLs makes at most CertFetchBurst
// fetches; the others are refused without calling out, as "could not verify now" (503), and
// are not remembered, so SNS's retry gets through once the bucket refills.
func TestCertFetchRateLimited(t *testing.T) {
	f := newFakeSNS(t)
	h := newCertHost(t, f)
	clk := newFakeClock()
	a := h.adapter(t, clk)

	const n = 4 * CertFetchBurst
	reqs := make([]provider.Request, n)
	for i := range reqs {
		reqs[i] = signedFor(t, f, fmt.Sprintf("%s/SimpleNotificationService-%02d.pem", h.srv.URL, i))
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() { errs[i] = a.Verify(reqs[i]) })
	}
	wg.Wait()

	var ok, limited []int
	for i, err := range errs {
		switch {
		case err == nil:
			ok = append(ok, i)
		case isRetryable(err) && errors.Is(err, errFetchLimited):
			limited = append(limited, i)
		default:
			t.Fatalf("request %d: err = %v, want nil or the fetch limit (ErrCertUnavailable, not ErrUnauthorized)", i, err)
		}
	}
	if got := h.total.Load(); got != CertFetchBurst {
		t.Fatalf("%d distinct URLs made %d fetches, want %d (the burst)", n, got, CertFetchBurst)
	}
	if len(ok) != CertFetchBurst || len(limited) != n-CertFetchBurst {
		t.Fatalf("%d verified and %d limited, want %d and %d", len(ok), len(limited), CertFetchBurst, n-CertFetchBurst)
	}

	// Still no token: the same refused URL is refused again, without a fetch.
	retry := reqs[limited[0]]
	if err := a.Verify(retry); !isRetryable(err) {
		t.Fatalf("retry before refill: err = %v, want the fetch limit", err)
	}
	if got := h.total.Load(); got != CertFetchBurst {
		t.Fatalf("a retry before refill fetched (total %d)", got)
	}
	// One second refills one token: SNS's retry of a refused message now verifies.
	clk.Advance(time.Duration(float64(time.Second) / float64(CertFetchRate)))
	if err := a.Verify(retry); err != nil {
		t.Fatalf("retry after refill: Verify: %v", err)
	}
	if got := h.total.Load(); got != CertFetchBurst+1 {
		t.Fatalf("after refill: %d fetches, want %d", got, CertFetchBurst+1)
	}
}

// A certificate already cached keeps verifying while forged requests hold the fetch budget at
// zero, and serving it does not take from that budget.
func TestCachedCertNotLimited(t *testing.T) {
	f := newFakeSNS(t)
	h := newCertHost(t, f)
	clk := newFakeClock()
	a := h.adapter(t, clk)
	good := signedFor(t, f, h.srv.URL+certPath)
	if err := a.Verify(good); err != nil {
		t.Fatalf("first Verify: %v", err)
	}
	for i := range 3 * CertFetchBurst {
		if err := a.Verify(good); err != nil {
			t.Fatalf("cached Verify %d: %v", i, err)
		}
	}
	// The cached hits above took nothing: exactly CertFetchBurst-1 tokens remain.
	fetched := 0
	for i := range 2 * CertFetchBurst {
		err := a.Verify(signedFor(t, f, fmt.Sprintf("%s/forged-%d.pem", h.srv.URL, i)))
		switch {
		case err == nil:
			fetched++
		case !isRetryable(err):
			t.Fatalf("forged %d: err = %v, want nil or the fetch limit", i, err)
		}
	}
	if fetched != CertFetchBurst-1 {
		t.Fatalf("%d forged URLs fetched after cached hits, want %d", fetched, CertFetchBurst-1)
	}
	total := h.total.Load()
	for i := range 10 {
		if err := a.Verify(good); err != nil {
			t.Fatalf("cached Verify %d with the budget exhausted: %v", i, err)
		}
	}
	if h.total.Load() != total || h.pathHits(certPath) != 1 {
		t.Fatalf("the cached certificate was fetched again (%d fetches of it)", h.pathHits(certPath))
	}
}

func TestFailedCertCacheBounded(t *testing.T) {
	clk := newFakeClock()
	c := newCertCache(CertCacheSize)
	c.now = clk.Now
	c.limit = rate.NewLimiter(0, 10*maxFailedCerts) // the limiter is not what is tested here
	fail := func(context.Context, string) (*x509.Certificate, error) {
		return nil, fmt.Errorf("%w: test", ErrCertUnavailable)
	}
	key := func(i int) string { return fmt.Sprintf("https://sns.us-east-1.amazonaws.com/%d.pem", i) }
	for i := range maxFailedCerts + 10 {
		clk.Advance(time.Millisecond)
		if _, _, err := c.get(context.Background(), key(i), fail); !errors.Is(err, ErrCertUnavailable) {
			t.Fatalf("get %d: err = %v", i, err)
		}
	}
	if len(c.failures) != maxFailedCerts {
		t.Fatalf("%d failures remembered, want %d", len(c.failures), maxFailedCerts)
	}
	if _, ok := c.failures[key(0)]; ok {
		t.Fatal("the failure closest to expiry was not dropped")
	}
	if _, ok := c.failures[key(maxFailedCerts+9)]; !ok {
		t.Fatal("the newest failure was not kept")
	}

	// Once expired, records make room before any live one is dropped.
	clk.Advance(FailedCertTTL)
	if _, _, err := c.get(context.Background(), "https://sns.us-east-1.amazonaws.com/new.pem", fail); err == nil {
		t.Fatal("get: no error from a failing fetch")
	}
	if len(c.failures) != 1 {
		t.Fatalf("%d failures remembered after all others expired, want 1", len(c.failures))
	}
}

// A fetch abandoned because its caller went away is not held against the URL.
func TestCanceledFetchNotRemembered(t *testing.T) {
	c := newCertCache(CertCacheSize)
	c.now = newFakeClock().Now
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	fetch := func(ctx context.Context, _ string) (*x509.Certificate, error) {
		calls++
		cancel()
		return nil, fmt.Errorf("%w: %v", ErrCertUnavailable, ctx.Err())
	}
	const u = "https://sns.us-east-1.amazonaws.com/x.pem"
	if _, _, err := c.get(ctx, u, fetch); !errors.Is(err, ErrCertUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if len(c.failures) != 0 {
		t.Fatal("a canceled fetch was remembered as a failure")
	}
	if _, _, err := c.get(context.Background(), u, fetch); !errors.Is(err, ErrCertUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if calls != 2 {
		t.Fatalf("fetch called %d times, want 2", calls)
	}
}
