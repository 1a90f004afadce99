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
// fetched. A cached certificate that is no longer valid at now is fetched again once, in case
// SNS replaced it at the same URL.
func (a *Adapter) certificate(ctx context.Context, rawURL string, now time.Time) (*x509.Certificate, error) {
	cert, cached, err := a.certs.get(ctx, rawURL, a.fetchCert)
	if err != nil {
		return nil, err
	}
	if err := checkCert(cert, now); err != nil {
		if !cached {
			return nil, err
		}
		a.certs.remove(rawURL)
		if cert, _, err = a.certs.get(ctx, rawURL, a.fetchCert); err != nil {
			return nil, err
		}
		if err := checkCert(cert, now); err != nil {
			return nil, err
		}
	}
	return cert, nil
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

// certCache holds certificates by URL, at most max of them (the oldest is evicted first). Calls
// for a URL that is being fetched wait for that fetch instead of starting another.
type certCache struct {
	mu       sync.Mutex
	max      int
	entries  map[string]*x509.Certificate
	order    []string // insertion order, for eviction
	inflight map[string]*certCall
}

type certCall struct {
	done chan struct{}
	cert *x509.Certificate
	err  error
}

func newCertCache(max int) *certCache {
	return &certCache{max: max, entries: map[string]*x509.Certificate{}, inflight: map[string]*certCall{}}
}

// get returns the certificate for key, calling fetch on a miss; cached reports a hit.
func (c *certCache) get(ctx context.Context, key string, fetch func(context.Context, string) (*x509.Certificate, error)) (cert *x509.Certificate, cached bool, err error) {
	c.mu.Lock()
	if cert, ok := c.entries[key]; ok {
		c.mu.Unlock()
		return cert, true, nil
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
	call := &certCall{done: make(chan struct{})}
	c.inflight[key] = call
	c.mu.Unlock()

	call.cert, call.err = fetch(ctx, key)

	c.mu.Lock()
	delete(c.inflight, key)
	if call.err == nil {
		c.putLocked(key, call.cert)
	}
	c.mu.Unlock()
	close(call.done)
	return call.cert, false, call.err
}

// put stores a certificate (tests inject one to run offline).
func (c *certCache) put(key string, cert *x509.Certificate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(key, cert)
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

func (c *certCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
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
