package loadgen

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// The flood sends well-formed Postscale events from its source address, each signed but not
// with the endpoint's secret, at its rate for the send phase, and tallies the answers.
func TestTheFloodSendsBadlySignedEventsAtItsRate(t *testing.T) {
	const secret = "whsec_the_endpoints_secret"
	var (
		mu      sync.Mutex
		sources = map[string]int{}
		bad     int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// A delivery event ({"id","type",…}) or an inbound email ({"event":"email.received",…}).
		var ev struct{ ID, Type, Event string }
		// Signed as Postscale signs, at its timestamp, but not with the endpoint's secret.
		sig := r.Header.Get(providertest.PostscaleSignatureHeader)
		ts, _, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
		unix, err := strconv.ParseInt(ts, 10, 64)
		verified := err != nil || sig == providertest.PostscaleSignature(secret, time.Unix(unix, 0), body)
		mu.Lock()
		sources[r.RemoteAddr[:strings.LastIndexByte(r.RemoteAddr, ':')]]++
		if json.Unmarshal(body, &ev) == nil && strings.HasPrefix(ev.Type+ev.Event, "email.") && !verified {
			bad++
		}
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	r := &runner{o: Options{URL: srv.URL, PostscaleEndpoint: "postscale", FloodRate: 200, FloodSource: "127.0.0.3"}}
	r.start = time.Now()
	r.end = r.start.Add(time.Second)
	rep := r.flood(t.Context())
	if rep.Sent != 200 || rep.Answers["401"] != 200 || rep.Skipped != 0 {
		t.Fatalf("flood %+v: want 200 sent in the second, each answered 401", rep)
	}
	if bad != 200 || sources["127.0.0.3"] != 200 {
		t.Fatalf("%d well-formed and badly signed of 200; sources %v", bad, sources)
	}
}
