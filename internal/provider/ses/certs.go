package ses

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultCertHostPattern matches the regional SNS endpoints that serve signing certificates and
// subscription confirmations: sns.<region>.amazonaws.com and, in China, .amazonaws.com.cn. The
// middle label must look like a region (us-east-1, us-gov-west-1, cn-northwest-1): the looser
// "sns\.[a-z0-9-]+\.amazonaws\.com" also matches sns.s3.amazonaws.com and
// sns.s3-us-west-2.amazonaws.com, which are the S3 bucket "sns" and serve whatever its owner
// uploads (the bypass fixed in novuhq/novu#11056).
const DefaultCertHostPattern = `^sns\.[a-z]{2}(-[a-z]+)+-[0-9]+\.amazonaws\.com(\.cn)?$`

// Limits on what Mailhook downloads.
const (
	// MaxCertBytes bounds a signing certificate response; SNS certificates are about 2 KiB.
	MaxCertBytes = 64 << 10
	// maxConfirmBytes bounds how much of a ConfirmSubscription response is read (then dropped).
	maxConfirmBytes = 64 << 10
	// CertCacheSize bounds the certificates kept per adapter. SNS uses one certificate per
	// region at a time, so a handful is the steady state.
	CertCacheSize = 64
	// DefaultHTTPTimeout bounds an outbound call when Settings.HTTPClient is nil. SNS gives up
	// on a delivery after 15 s, so fetching a certificate must take well under that.
	DefaultHTTPTimeout = 10 * time.Second
)

// Limits on how often an unauthenticated request can make Mailhook call out. Anyone who knows an
// allow-listed TopicArn can name any .pem path on an SNS host as SigningCertURL, and the
// certificate has to be fetched before the signature can be checked (issue 17).
const (
	// FailedCertTTL is how long a failed fetch is remembered per URL, so repeating a failing
	// URL does not make Mailhook fetch it again. It is kept well under the 20 s SNS waits
	// after a failed attempt before retrying (default HTTP/S delivery policy: 3 retries, then
	// the message is dropped). The attempt fails when Mailhook answers 503, right after the
	// failure is recorded, so the record has expired when the retry arrives: a brief outage of
	// the certificate host must not also fail every retry of a genuine message. Distinct URLs
	// are not slowed by this at all; the fetch limit below bounds the overall rate.
	FailedCertTTL = 10 * time.Second
	// maxFailedCerts bounds the remembered failures. With the fetch limit, at most
	// CertFetchBurst + FailedCertTTL×CertFetchRate (15) of them are live at once; the bound only
	// matters if those constants change.
	maxFailedCerts = 64
	// CertFetchBurst and CertFetchRate bound the outbound fetches of certificates that are not
	// cached, per adapter (token bucket). SNS signs with one certificate per region at a time,
	// so a fresh process needs one fetch per region it receives from (a burst of a few) and then
	// a new one only when AWS rotates a certificate. One per second stays far above that need
	// while capping what forged requests can make Mailhook send at 60 a minute per endpoint.
	// Cached certificates do not use the budget, so the steady state keeps verifying while it
	// is exhausted.
	CertFetchBurst = 5
	CertFetchRate  = rate.Limit(1) // fetches per second, refilled continuously
)

// errFetchLimited is wrapped, together with ErrCertUnavailable, when a fetch is refused because
// CertFetchRate is exhausted: the message may be genuine, so it is answered 503 and SNS retries.
var errFetchLimited = fmt.Errorf("outbound certificate fetches are limited to %g per second (burst %d)", float64(CertFetchRate), CertFetchBurst)

// hostMatcher compiles a configured pattern so that it must match the whole host name: an
// unanchored "sns\.us-east-1\.amazonaws\.com" would otherwise also accept
// sns.us-east-1.amazonaws.com.attacker.example.
func hostMatcher(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		pattern = DefaultCertHostPattern
	}
	return regexp.Compile(`^(?:` + pattern + `)$`)
}

// checkURL applies the rules for URLs SNS hands us: https, no user info, and a host name (port
// ignored) the host pattern matches. A certificate URL must also have a path ending in .pem and
// no query or fragment.
func (a *Adapter) checkURL(raw string, cert bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case raw == "" || err != nil:
		return nil, errors.New("not a URL")
	case u.Scheme != "https":
		return nil, errors.New("scheme is not https")
	case u.User != nil:
		return nil, errors.New("URL has user info")
	case u.Opaque != "" || u.Host == "":
		return nil, errors.New("URL has no host")
	case !a.hosts.MatchString(strings.ToLower(u.Hostname())):
		return nil, errors.New("host does not match cert_host_pattern")
	}
	if cert {
		if !strings.HasSuffix(u.Path, ".pem") {
			return nil, errors.New("path does not end in .pem")
		}
		if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
			return nil, errors.New("URL has a query or fragment")
		}
	}
	return u, nil
}

// certificate returns the signing certificate at rawURL (already checked), from the cache or
// fetched; a URL whose fetch failed within FailedCertTTL, or a fetch beyond CertFetchRate, fails
// without calling out. A cached certificate that is no longer valid at now is fetched again
// once, in case SNS replaced it at the same URL.
func (a *Adapter) certificate(ctx context.Context, rawURL string, now time.Time) (*x509.Certificate, error) {
	// The validity check is part of the fetch so that a certificate that is unusable on
	// arrival (an old, expired one still served at its URL) is remembered as a failed fetch
	// rather than cached; cached, it would be removed and fetched again on every request.
	fetch := func(ctx context.Context, u string) (*x509.Certificate, error) {
		cert, err := a.fetchCert(ctx, u)
		if err != nil {
			return nil, err
		}
		if err := checkCert(cert, now); err != nil {
			return nil, err
		}
		return cert, nil
	}
	cert, cached, err := a.certs.get(ctx, rawURL, fetch)
	if err != nil {
		return nil, err
	}
	if !cached || checkCert(cert, now) == nil {
		return cert, nil
	}
	a.certs.remove(rawURL)
	cert, _, err = a.certs.get(ctx, rawURL, fetch)
	return cert, err
}

// checkCert accepts a certificate valid at now, holding an RSA key usable for signatures.
func checkCert(c *x509.Certificate, now time.Time) error {
	switch {
	case now.Before(c.NotBefore):
		return fmt.Errorf("%w: not valid yet", ErrCertificate)
	case now.After(c.NotAfter):
		return fmt.Errorf("%w: expired", ErrCertificate)
	case c.KeyUsage != 0 && c.KeyUsage&x509.KeyUsageDigitalSignature == 0:
		return fmt.Errorf("%w: key usage excludes digital signatures", ErrCertificate)
	}
	if _, ok := c.PublicKey.(*rsa.PublicKey); !ok {
		return fmt.Errorf("%w: key is not RSA", ErrCertificate)
	}
	return nil
}

// fetchCert downloads and parses a certificate. Failures a retry may fix (network, 5xx, 429)
// wrap ErrCertUnavailable; the others (4xx, too large, not a certificate) wrap ErrCertificate.
func (a *Adapter) fetchCert(ctx context.Context, rawURL string) (*x509.Certificate, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCertificate, err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCertUnavailable, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return nil, fmt.Errorf("%w: certificate URL answered %d", ErrCertUnavailable, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: certificate URL answered %d", ErrCertificate, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxCertBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading certificate: %v", ErrCertUnavailable, err)
	}
	if len(body) > MaxCertBytes {
		return nil, fmt.Errorf("%w: certificate response exceeds %d bytes", ErrCertificate, MaxCertBytes)
	}
	return parseCertPEM(body)
}

// parseCertPEM parses the first CERTIFICATE block of a PEM document.
func parseCertPEM(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("%w: no PEM certificate", ErrCertificate)
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCertificate, err)
		}
		return c, nil
	}
}

// certCache holds certificates by URL, at most max of them (the oldest is evicted first), and
// remembers failed fetches for FailedCertTTL. Calls for a URL that is being fetched wait for that
// fetch instead of starting another; a fetch that does start must get a token from limit.
type certCache struct {
	mu       sync.Mutex
	max      int
	entries  map[string]*x509.Certificate
	order    []string // insertion order, for eviction
	inflight map[string]*certCall
	failures map[string]certFailure
	limit    *rate.Limiter // used under mu with c.now, so tests need no sleep
	// now is the clock for failures and the limiter; tests replace it to avoid sleeping.
	now func() time.Time
}

type certCall struct {
	done chan struct{}
	cert *x509.Certificate
	err  error
}

// certFailure is a failed fetch: err keeps its class (ErrCertUnavailable or ErrCertificate), so
// a request served from it gets the same answer (503 or 401) as the one that fetched.
type certFailure struct {
	err   error
	until time.Time
}

func newCertCache(max int) *certCache {
	return &certCache{
		max:      max,
		entries:  map[string]*x509.Certificate{},
		inflight: map[string]*certCall{},
		failures: map[string]certFailure{},
		limit:    rate.NewLimiter(CertFetchRate, CertFetchBurst),
		now:      time.Now,
	}
}

// get returns the certificate for key, calling fetch on a miss; cached reports a hit.
func (c *certCache) get(ctx context.Context, key string, fetch func(context.Context, string) (*x509.Certificate, error)) (cert *x509.Certificate, cached bool, err error) {
	c.mu.Lock()
	if cert, ok := c.entries[key]; ok {
		c.mu.Unlock()
		return cert, true, nil
	}
	now := c.now()
	if f, ok := c.failures[key]; ok {
		if now.Before(f.until) {
			c.mu.Unlock()
			return nil, false, fmt.Errorf("%w (remembered failure, not fetched again for %s)", f.err, f.until.Sub(now).Round(time.Millisecond))
		}
		delete(c.failures, key)
	}
	if call, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		select {
		case <-call.done:
			return call.cert, false, call.err
		case <-ctx.Done():
			return nil, false, fmt.Errorf("%w: %v", ErrCertUnavailable, ctx.Err())
		}
	}
	// Refusals are not remembered as failures: the URL may be genuine, and SNS's retry should
	// get the next free token rather than a stored refusal.
	if !c.limit.AllowN(now, 1) {
		c.mu.Unlock()
		return nil, false, fmt.Errorf("%w: %w", ErrCertUnavailable, errFetchLimited)
	}
	call := &certCall{done: make(chan struct{})}
	c.inflight[key] = call
	c.mu.Unlock()

	call.cert, call.err = fetch(ctx, key)

	c.mu.Lock()
	delete(c.inflight, key)
	switch {
	case call.err == nil:
		c.putLocked(key, call.cert)
	case ctx.Err() == nil:
		// A fetch cut short by its own caller going away says nothing about the URL, so only
		// the others are remembered.
		c.rememberLocked(key, call.err, c.now())
	}
	c.mu.Unlock()
	close(call.done)
	return call.cert, false, call.err
}

// rememberLocked records a failed fetch, dropping expired records first and then, if still
// full, the one closest to expiry.
func (c *certCache) rememberLocked(key string, err error, now time.Time) {
	if _, ok := c.failures[key]; !ok && len(c.failures) >= maxFailedCerts {
		var victim string
		var soonest time.Time
		for k, f := range c.failures {
			if !now.Before(f.until) {
				delete(c.failures, k)
				continue
			}
			if victim == "" || f.until.Before(soonest) {
				victim, soonest = k, f.until
			}
		}
		if len(c.failures) >= maxFailedCerts {
			delete(c.failures, victim)
		}
	}
	c.failures[key] = certFailure{err: err, until: now.Add(FailedCertTTL)}
}

func (c *certCache) putLocked(key string, cert *x509.Certificate) {
	if _, ok := c.entries[key]; !ok {
		for len(c.order) >= c.max {
			delete(c.entries, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, key)
	}
	c.entries[key] = cert
	delete(c.failures, key)
}

func (c *certCache) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok {
		return
	}
	delete(c.entries, key)
	for i, k := range c.order {
		if k == key {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
}

// noRedirects makes a copy of client that never follows a redirect: a certificate or a
// confirmation must come from the checked URL itself, not from wherever it points.
func noRedirects(client *http.Client) *http.Client {
	if client == nil {
		client = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}
