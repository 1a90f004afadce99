package loadgen

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailhook/mailhook/internal/provider/postscale"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// FloodReport is what the flood of badly signed requests (Options.FloodRate) got: it runs
// beside the valid traffic for the whole send phase, so the valid traffic's rates show what it
// cost them.
type FloodReport struct {
	Rate    float64        `json:"rate"`    // requests per second asked for
	Source  string         `json:"source"`  // the local address it came from
	Sent    int64          `json:"sent"`    // requests sent
	Skipped int64          `json:"skipped"` // not sent: floodMaxInflight were in flight
	Answers map[string]int `json:"answers"` // by status ("transport error" when none)
	// SentPerSec is Sent over the send phase's length: what the server really received.
	SentPerSec float64 `json:"sent_per_sec"`
}

// floodMaxInflight bounds the flood's requests in flight: an attacker's client is not
// unbounded either, and the load generator must not run this machine out of sockets.
const floodMaxInflight = 512

// floodBodies is how many distinct bodies the flood cycles through: real Postscale events of
// this run's shape, none of which the valid traffic sends.
const floodBodies = 256

// flood sends o.FloodRate badly signed Postscale requests per second (open loop) from
// o.FloodSource until the send phase ends. Each body is a well-formed event signed with a secret
// the endpoint does not have: the signature check refuses it (401), after the body was read, so
// it costs mailhook what such a request costs, and the rejected-request recorder sees it.
func (r *runner) flood(ctx context.Context) *FloodReport {
	o := r.o
	rep := &FloodReport{Rate: o.FloodRate, Source: o.FloodSource, Answers: map[string]int{}}
	gen := NewGenerator(GenOptions{Seed: o.Seed + 7919, RunID: "flood" + randomHex(3)})
	src := NewSource(gen, MixOptions{Weights: map[string]int{Postscale: 1}, Width: floodBodies})
	bodies := make([][]byte, floodBodies)
	for i := range bodies {
		req := src.Next()
		bodies[i] = req.Body
		src.Done(req)
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	if o.FloodSource != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(o.FloodSource)}
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: dialer.DialContext, MaxIdleConns: floodMaxInflight, MaxIdleConnsPerHost: floodMaxInflight,
		IdleConnTimeout: 90 * time.Second, DisableCompression: true,
	}}
	defer client.CloseIdleConnections()
	url := strings.TrimRight(o.URL, "/") + "/webhooks/" + o.PostscaleEndpoint
	var (
		mu       sync.Mutex
		inflight atomic.Int64
		wg       sync.WaitGroup
	)
	post := func(body []byte) {
		defer inflight.Add(-1)
		label := "transport error"
		if hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body)); err == nil {
			hr.Header.Set("Content-Type", "application/json")
			hr.Header.Set(postscale.DeliveryIDHeader, "flood-"+randomHex(6))
			providertest.SignPostscale(hr, "whsec_not_the_endpoints_secret", body, time.Now())
			if resp, err := client.Do(hr); err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
				resp.Body.Close()
				label = codeLabel(resp.StatusCode, webhookAnswer{}, nil)
			}
		}
		mu.Lock()
		rep.Answers[label]++
		mu.Unlock()
	}
	pace(ctx, r.start, r.end, o.FloodRate, func(i int, _ time.Time) bool {
		if r.full() {
			return false
		}
		if inflight.Load() >= floodMaxInflight {
			rep.Skipped++
			return true
		}
		inflight.Add(1)
		rep.Sent++
		body := bodies[i%len(bodies)]
		wg.Go(func() { post(body) })
		return true
	})
	wg.Wait()
	if d := time.Since(r.start).Seconds(); d > 0 {
		rep.SentPerSec = float64(rep.Sent) / d
	}
	return rep
}
