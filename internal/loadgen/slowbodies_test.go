package loadgen

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The uploads are held until the server answers or the hold ends, each answer is tallied, the
// provider's signed webhooks and the monitor's /healthz are sent meanwhile, and the RSS of a
// live process is read.
func TestSlowBodiesTalliesAnswers(t *testing.T) {
	var signed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			w.WriteHeader(http.StatusOK)
		case r.Header.Get("X-Postscale-Signature") != "":
			signed.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusOK)
		case r.Header.Get("Content-Length") == "100" && strings.HasSuffix(r.RemoteAddr[:strings.LastIndexByte(r.RemoteAddr, ':')], ".3"):
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusServiceUnavailable) // refused at once, unread
		default:
			_, _ = io.Copy(io.Discard, r.Body) // read until the client gives up
		}
	}))
	defer srv.Close()
	res, err := SlowBodies(t.Context(), SlowBodiesOptions{URL: srv.URL, Endpoint: "postscale", Secret: "whsec_x",
		Conns: 4, Sources: []string{"127.0.0.2", "127.0.0.3"}, Declared: 100, Sent: 10, Hold: 1500 * time.Millisecond, PID: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Opened != 4 || res.Answers["503"] != 2 || res.Answers["open"] != 2 || res.BodySent != 40 {
		t.Fatalf("result %+v, want 2 answered 503 and 2 held open, 10 bytes sent by each", res)
	}
	if res.Healthz["200"] == 0 || res.Webhooks["200"] == 0 || signed.Load() == 0 {
		t.Fatalf("monitor %v and provider %v: want answers during the hold", res.Healthz, res.Webhooks)
	}
	if res.IdleRSS <= 0 || res.PeakRSS < res.IdleRSS {
		t.Fatalf("RSS idle %d, peak %d", res.IdleRSS, res.PeakRSS)
	}
}
