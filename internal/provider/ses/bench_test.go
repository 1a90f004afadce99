package ses

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/provider"
)

func benchRequest(b *testing.B, fixture, version string) provider.Request {
	b.Helper()
	k, _ := keys(b)
	msg, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		b.Fatal(err)
	}
	env := offlineEnvelope(string(msg))
	if err := signEnvelope(&env, k, version); err != nil {
		b.Fatal(err)
	}
	h := http.Header{}
	h.Set(MessageTypeHeader, TypeNotification)
	return provider.Request{Header: h, Body: env.Body(), RemoteIP: "192.0.2.1", Now: time.Now()}
}

// BenchmarkVerify measures Verify with the certificate already cached (the steady state).
func BenchmarkVerify(b *testing.B) {
	for _, v := range []string{SignatureVersion1, SignatureVersion2} {
		b.Run("v"+v, func(b *testing.B) {
			a := offlineAdapter(b)
			r := benchRequest(b, "event_delivery.json", v)
			if err := a.Verify(r); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(r.Body)))
			for b.Loop() {
				if err := a.Verify(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParse measures Parse of a documented event and of a bounce naming two recipients.
func BenchmarkParse(b *testing.B) {
	for _, fx := range []string{"event_delivery.json", "notification_bounce_no_dsn.json"} {
		b.Run(fx, func(b *testing.B) {
			a := offlineAdapter(b)
			r := benchRequest(b, fx, SignatureVersion2)
			b.ReportAllocs()
			b.SetBytes(int64(len(r.Body)))
			for b.Loop() {
				if _, err := a.Parse(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
