package e2e_test

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// snsCertHost serves a fresh self-signed certificate at path over TLS, as SNS's certificate host
// does, and returns the key that signs for it and the server (whose Client trusts it: pass it
// as the harness's outbound client).
func snsCertHost(t *testing.T, path string) (*rsa.PrivateKey, *httptest.Server) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := providertest.SelfSignedCertPEM(key, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	certs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(certPEM)
	}))
	t.Cleanup(certs.Close)
	return key, certs
}
