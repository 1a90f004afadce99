package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// SlowBodiesOptions configure `mailhook-loadtest slow-bodies`: an attacker's unsigned uploads
// that declare a large body, send most of it and stall, held open at once, while a provider
// keeps sending signed webhooks and a monitor asks /healthz; the target's RSS is sampled.
type SlowBodiesOptions struct {
	URL      string // mailhook base URL (loopback)
	Endpoint string // the Postscale endpoint's name
	Secret   string // its signing secret, for the provider's valid webhooks
	Conns    int    // uploads held open at once
	// Sources are the local addresses the uploads come from, in turn (127.0.0.2, …: every
	// 127/8 address is this machine's); the provider's webhooks come from 127.0.0.1.
	Sources  []string
	Declared int           // Content-Length each upload declares
	Sent     int           // bytes each sends before it stalls
	Hold     time.Duration // how long the uploads are held (the server's read timeout may end them sooner)
	PID      int           // the target's process id, for RSS (0: not sampled)
	Out      io.Writer
}

// SlowBodiesResult is what `slow-bodies` measured.
type SlowBodiesResult struct {
	Conns    int            `json:"conns"`
	Opened   int            `json:"opened"`
	Answers  map[string]int `json:"answers"`   // the uploads' answers by status ("none": closed without one, "open": still held at the end)
	BodySent int64          `json:"body_sent"` // bytes the uploads wrote in all
	IdleRSS  int64          `json:"idle_rss_bytes"`
	PeakRSS  int64          `json:"peak_rss_bytes"`
	Healthz  map[string]int `json:"healthz"`  // /healthz answers during the hold, by status
	Webhooks map[string]int `json:"webhooks"` // the provider's signed webhooks during the hold, by status
}

// SlowBodies runs the attack and reports it.
func SlowBodies(ctx context.Context, o SlowBodiesOptions) (SlowBodiesResult, error) {
	u, err := url.Parse(o.URL)
	if err == nil {
		err = requireLoopbackHost(u.Hostname())
	}
	if err != nil {
		return SlowBodiesResult{}, fmt.Errorf("slow-bodies: --url %q: %w", o.URL, err)
	}
	if len(o.Sources) == 0 {
		o.Sources = []string{"127.0.0.2"}
	}
	res := SlowBodiesResult{Conns: o.Conns, Answers: map[string]int{}, Healthz: map[string]int{}, Webhooks: map[string]int{}}
	res.IdleRSS = rss(o.PID)
	res.PeakRSS = res.IdleRSS

	var mu sync.Mutex
	count := func(m map[string]int, k string) { mu.Lock(); m[k]++; mu.Unlock() }
	holdCtx, cancel := context.WithTimeout(ctx, o.Hold)
	defer cancel()
	head := fmt.Sprintf("POST /webhooks/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		o.Endpoint, u.Host, o.Declared)
	chunk := []byte(strings.Repeat("x", 32<<10))

	var wg sync.WaitGroup
	opened := make(chan struct{}, o.Conns)
	for i := range o.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(o.Sources[i%len(o.Sources)])}}
			conn, err := d.DialContext(ctx, "tcp", u.Host)
			if err != nil {
				count(res.Answers, "dial_error")
				return
			}
			defer conn.Close()
			opened <- struct{}{}
			answered := make(chan string, 1)
			go func() {
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					answered <- "none"
					return
				}
				resp.Body.Close()
				answered <- strconv.Itoa(resp.StatusCode)
			}()
			sent := 0
			if _, err := io.WriteString(conn, head); err == nil {
				for sent < o.Sent {
					n := min(len(chunk), o.Sent-sent)
					if _, err := conn.Write(chunk[:n]); err != nil {
						break
					}
					sent += n
				}
			}
			mu.Lock()
			res.BodySent += int64(sent)
			mu.Unlock()
			select {
			case a := <-answered:
				count(res.Answers, a)
			case <-holdCtx.Done():
				count(res.Answers, "open")
			}
		}()
	}
	// While the uploads are held: the monitor, the provider, and the RSS.
	client := &http.Client{Timeout: 10 * time.Second}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	n := 0
loop:
	for {
		select {
		case <-holdCtx.Done():
			break loop
		case <-tick.C:
		}
		if r := rss(o.PID); r > res.PeakRSS {
			res.PeakRSS = r
		}
		if resp, err := client.Get(o.URL + "/healthz"); err != nil {
			count(res.Healthz, "error")
		} else {
			resp.Body.Close()
			count(res.Healthz, strconv.Itoa(resp.StatusCode))
		}
		n++
		body := fmt.Appendf(nil, `{"id":"evt_slowbodies_%d_%d","type":"email.delivered","created_at":%q,"data":{"email_id":"msg_slowbodies_%d","to":"r@example.com"}}`,
			time.Now().UnixNano(), n, time.Now().UTC().Format(time.RFC3339), n)
		req, _ := http.NewRequest(http.MethodPost, o.URL+"/webhooks/"+o.Endpoint, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Postscale-Signature", providertest.PostscaleSignature(o.Secret, time.Now(), body))
		if resp, err := client.Do(req); err != nil {
			count(res.Webhooks, "error")
		} else {
			resp.Body.Close()
			count(res.Webhooks, strconv.Itoa(resp.StatusCode))
		}
	}
	wg.Wait()
	res.Opened = len(opened)
	if o.Out != nil {
		enc := json.NewEncoder(o.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// rss is a process's resident set size in bytes (ProcMemory's VmRSS), 0 when unknown.
func rss(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	_, r, _ := ProcMemory(pid)
	return r
}

func slowBodiesCommand() *cobra.Command {
	o := SlowBodiesOptions{}
	cmd := &cobra.Command{
		Use:   "slow-bodies",
		Short: "Hold many slow unsigned uploads open against mailhook while a provider sends signed webhooks; report answers and RSS",
		Long: `slow-bodies opens --conns connections to mailhook's Postscale endpoint at once, from the
--sources addresses in turn, each declaring a --declared-byte body, sending --sent bytes of it and
stalling, for --hold. Meanwhile, every 500 ms, it asks /healthz, sends one signed Postscale webhook
from 127.0.0.1, and samples the RSS of --pid. It prints what the uploads were answered, the
monitor's and the provider's answers, and the idle and peak RSS (docs/BENCHMARKS.md).`,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.Secret == "" {
				return errors.New("--postscale-secret is required (the provider's webhooks are signed)")
			}
			o.Out = c.OutOrStdout()
			_, err := SlowBodies(c.Context(), o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.URL, "url", "http://127.0.0.1:8000", "mailhook base URL (loopback)")
	f.StringVar(&o.Endpoint, "postscale-endpoint", "postscale", "endpoint name of the Postscale endpoint")
	f.StringVar(&o.Secret, "postscale-secret", os.Getenv("POSTSCALE_WEBHOOK_SECRET"), "Postscale signing secret (default $POSTSCALE_WEBHOOK_SECRET)")
	f.IntVar(&o.Conns, "conns", 2000, "uploads held open at once")
	f.StringSliceVar(&o.Sources, "sources", []string{"127.0.0.2"}, "local addresses the uploads come from, in turn")
	f.IntVar(&o.Declared, "declared", 1<<20, "Content-Length each upload declares")
	f.IntVar(&o.Sent, "sent", 1_000_000, "bytes each upload sends before it stalls")
	f.DurationVar(&o.Hold, "hold", 20*time.Second, "how long the uploads are held")
	f.IntVar(&o.PID, "pid", 0, "mailhook's process id, for its RSS")
	return cmd
}
