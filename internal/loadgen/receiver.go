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
	"os"
	"os/signal"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/signature"
)

// Receiver modes.
const (
	// ReceiverOK verifies every request's Standard Webhooks signature and answers 200 (401 for
	// a bad signature), recording what it answered.
	ReceiverOK = "ok"
	// ReceiverHang reads every request and never answers: it holds the connection until the
	// client gives up (or the receiver stops), counting what it holds.
	ReceiverHang = "hang"
	// ReceiverRefuse is not a mode of the receiver: a sink that refuses connections is a URL
	// with nothing listening on its port (the benchmark points the sink at a closed port).
	ReceiverRefuse = "refuse"
)

// ReceiverOptions configure `mailhook-loadtest receiver`.
type ReceiverOptions struct {
	Listen string // loopback host:port the sink's URL points at
	// Control, when set, is a second loopback address serving GET /stats (the tally so far,
	// JSON) and POST /mode?mode=ok|hang (switch the mode; the listener keeps its port).
	Control string
	Secret  string // the sink's whsec_ secret
	Mode    string // ok or hang, at start
	// Out is where the final tally goes (JSON) when the receiver stops; RequestsOut, when set,
	// gets one JSON line per request.
	Out         string
	RequestsOut string
	// RateWindow is the window the highest answered count is taken over (sliding).
	RateWindow time.Duration
}

// ReceiverRecord is one request the receiver got.
type ReceiverRecord struct {
	ID        string    `json:"id"` // webhook-id
	Type      string    `json:"type,omitempty"`
	Provider  string    `json:"provider,omitempty"`
	MessageID string    `json:"message_id,omitempty"`
	Version   int64     `json:"version,omitempty"`
	At        time.Time `json:"at"`   // arrival (request read)
	Mode      string    `json:"mode"` // the mode that handled it
	// Code is what it was answered: 200, 401 (bad signature), 0 (held, never answered).
	Code int `json:"code"`
}

// ModeChange is when the receiver's mode was set.
type ModeChange struct {
	At   time.Time `json:"at"`
	Mode string    `json:"mode"`
}

// ReceiverStats is the receiver's tally, written to --out when it stops.
type ReceiverStats struct {
	Listen string       `json:"listen"`
	Mode   string       `json:"mode"`  // the mode at the end
	Modes  []ModeChange `json:"modes"` // the start mode, then every switch

	Requests      int `json:"requests"`     // every request read, whatever the mode
	Answered2xx   int `json:"answered_2xx"` // requests answered 200
	BadSignatures int `json:"bad_signatures"`
	BadBodies     int `json:"bad_bodies"` // signed, but not a notification's JSON (still 200)

	DistinctIDs    int `json:"distinct_ids"`     // webhook-ids among all requests
	DistinctIDs2xx int `json:"distinct_ids_2xx"` // webhook-ids answered 200 at least once
	// DuplicateIDs: ids answered 200 more than once; ExtraDeliveries the 200s beyond the first.
	DuplicateIDs    int `json:"duplicate_ids"`
	ExtraDeliveries int `json:"extra_deliveries"`
	// OrderViolations: 200s to a message.status_changed of version v after a 200 to a higher
	// version of the same provider+message.
	OrderViolations        int      `json:"order_violations"`
	OrderViolationExamples []string `json:"order_violation_examples,omitempty"`
	MessagesWithVersions   int      `json:"messages_with_versions"`

	RateWindowSeconds float64 `json:"rate_window_seconds"`
	// MaxAnsweredInWindow: the most 200s within any RateWindow (sliding); the 10-window
	// figure is the same over 10 × RateWindow (a token bucket's burst matters less there).
	MaxAnsweredInWindow    int     `json:"max_answered_in_window"`
	MaxAnsweredIn10Windows int     `json:"max_answered_in_10_windows"`
	AnsweredPerSecMean     float64 `json:"answered_per_sec_mean"` // 200s / (last 200 − first 200)

	Connections     int `json:"connections"`      // TCP connections accepted
	ConnectionsOpen int `json:"connections_open"` // open now
	MaxConnsOpen    int `json:"max_connections_open"`
	HeldNow         int `json:"held_now"`   // requests held unanswered now (hang)
	MaxHeld         int `json:"max_held"`   // the most held at once
	HeldTotal       int `json:"held_total"` // requests ever held
	MaxInFlight     int `json:"max_in_flight"`

	FirstRequest  *time.Time `json:"first_request,omitempty"`
	LastRequest   *time.Time `json:"last_request,omitempty"`
	FirstAnswered *time.Time `json:"first_answered,omitempty"`
	LastAnswered  *time.Time `json:"last_answered,omitempty"`
}

// receiverBook is the receiver's bookkeeping; safe for concurrent use.
type receiverBook struct {
	mu         sync.Mutex
	keepLog    bool
	records    []ReceiverRecord
	requests   int
	answered   int
	badSig     int
	badBody    int
	ids        map[string]int // requests by id
	ok         map[string]int // 200s by id
	maxVersion map[string]int64
	violations int
	examples   []string
	answeredAt []time.Time
	first      time.Time
	last       time.Time
	conns      int
	open       int
	maxOpen    int
	held       int
	maxHeld    int
	heldTotal  int
	inflight   int
	maxFlight  int
	modes      []ModeChange
}

func newReceiverBook(keepLog bool) *receiverBook {
	return &receiverBook{keepLog: keepLog, ids: map[string]int{}, ok: map[string]int{}, maxVersion: map[string]int64{}}
}

// arrive books a request read at rec.At.
func (b *receiverBook) arrive(rec ReceiverRecord) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests++
	b.ids[rec.ID]++
	if b.first.IsZero() || rec.At.Before(b.first) {
		b.first = rec.At
	}
	if rec.At.After(b.last) {
		b.last = rec.At
	}
	b.inflight++
	b.maxFlight = max(b.maxFlight, b.inflight)
}

// leave books a request's end (answered, refused or given up on).
func (b *receiverBook) leave() {
	b.mu.Lock()
	b.inflight--
	b.mu.Unlock()
}

// answer books the answer to rec (rec.Code) at now; a 200 counts for duplicates, version
// order and the rate.
func (b *receiverBook) answer(rec ReceiverRecord, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.keepLog {
		b.records = append(b.records, rec)
	}
	if rec.Code < 200 || rec.Code > 299 {
		return
	}
	b.answered++
	b.ok[rec.ID]++
	b.answeredAt = append(b.answeredAt, now)
	if rec.Type != typeStatusChanged || rec.MessageID == "" {
		return
	}
	k := rec.Provider + "/" + rec.MessageID
	if hi, seen := b.maxVersion[k]; seen && rec.Version < hi {
		b.violations++
		if len(b.examples) < 10 {
			b.examples = append(b.examples, fmt.Sprintf("%s: version %d (%s) answered after version %d", k, rec.Version, rec.ID, hi))
		}
		return
	}
	b.maxVersion[k] = rec.Version
}

// hold books a request held unanswered (+1) or let go (-1); a held request goes to the log
// when it is let go, with code 0.
func (b *receiverBook) hold(rec ReceiverRecord, delta int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held += delta
	if delta > 0 {
		b.heldTotal++
		b.maxHeld = max(b.maxHeld, b.held)
	} else if b.keepLog {
		b.records = append(b.records, rec)
	}
}

// conn books a TCP connection opened (+1) or closed (-1).
func (b *receiverBook) conn(delta int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open += delta
	if delta > 0 {
		b.conns++
		b.maxOpen = max(b.maxOpen, b.open)
	}
}

func (b *receiverBook) setMode(mode string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.modes = append(b.modes, ModeChange{At: at, Mode: mode})
}

// stats is the tally so far.
func (b *receiverBook) stats(window time.Duration) ReceiverStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := ReceiverStats{
		Modes: slices.Clone(b.modes), Requests: b.requests, Answered2xx: b.answered, BadSignatures: b.badSig, BadBodies: b.badBody,
		DistinctIDs: len(b.ids), DistinctIDs2xx: len(b.ok), OrderViolations: b.violations,
		OrderViolationExamples: slices.Clone(b.examples), MessagesWithVersions: len(b.maxVersion),
		RateWindowSeconds: window.Seconds(), Connections: b.conns, ConnectionsOpen: b.open, MaxConnsOpen: b.maxOpen,
		HeldNow: b.held, MaxHeld: b.maxHeld, HeldTotal: b.heldTotal, MaxInFlight: b.maxFlight,
	}
	if len(b.modes) > 0 {
		st.Mode = b.modes[len(b.modes)-1].Mode
	}
	for _, n := range b.ok {
		if n > 1 {
			st.DuplicateIDs++
			st.ExtraDeliveries += n - 1
		}
	}
	times := slices.Clone(b.answeredAt)
	slices.SortFunc(times, func(x, y time.Time) int { return x.Compare(y) })
	st.MaxAnsweredInWindow = maxInWindow(times, window)
	st.MaxAnsweredIn10Windows = maxInWindow(times, 10*window)
	if n := len(times); n > 0 {
		f, l := times[0], times[n-1]
		st.FirstAnswered, st.LastAnswered = &f, &l
		if d := l.Sub(f).Seconds(); d > 0 {
			st.AnsweredPerSecMean = float64(n) / d
		}
	}
	if !b.first.IsZero() {
		f, l := b.first, b.last
		st.FirstRequest, st.LastRequest = &f, &l
	}
	return st
}

// maxInWindow is the most of the sorted times that fall within any half-open interval
// [t, t+w): a sliding window, so a burst across a second's boundary counts whole.
func maxInWindow(sorted []time.Time, w time.Duration) int {
	best, lo := 0, 0
	for hi, t := range sorted {
		for t.Sub(sorted[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// Receiver is a second downstream sink for outage benchmarks: it answers (ok) or holds every
// request (hang), and can be switched between the two without leaving its port.
type Receiver struct {
	o      ReceiverOptions
	scheme *signature.Standard
	book   *receiverBook
	mode   atomic.Value // string
	quit   chan struct{}
	ln     net.Listener
	srv    *http.Server
	ctlLn  net.Listener
	ctl    *http.Server
	done   sync.WaitGroup
}

// StartReceiver listens on o.Listen (and o.Control) and serves until Stop.
func StartReceiver(o ReceiverOptions) (*Receiver, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	scheme, err := signature.NewStandard(o.Secret, 5*time.Minute)
	if err != nil {
		return nil, exitcode.UsageError(fmt.Errorf("--secret: %w", err))
	}
	rc := &Receiver{o: o, scheme: scheme, book: newReceiverBook(o.RequestsOut != ""), quit: make(chan struct{})}
	rc.SetMode(o.Mode)
	if rc.ln, err = net.Listen("tcp", o.Listen); err != nil {
		return nil, fmt.Errorf("receiver: listen on %s: %w", o.Listen, err)
	}
	// No read or write timeout: a hanging receiver holds each request until its client gives up.
	rc.srv = &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			rc.book.conn(1)
		case http.StateClosed, http.StateHijacked:
			rc.book.conn(-1)
		}
	}}
	rc.done.Go(func() { _ = rc.srv.Serve(rc.ln) })
	if o.Control != "" {
		if rc.ctlLn, err = net.Listen("tcp", o.Control); err != nil {
			rc.Stop()
			return nil, fmt.Errorf("receiver: listen on %s (--control): %w", o.Control, err)
		}
		rc.ctl = &http.Server{Handler: rc.controlHandler(), ReadHeaderTimeout: 10 * time.Second}
		rc.done.Go(func() { _ = rc.ctl.Serve(rc.ctlLn) })
	}
	return rc, nil
}

func (o *ReceiverOptions) validate() error {
	switch o.Mode {
	case ReceiverOK, ReceiverHang:
	case ReceiverRefuse:
		return exitcode.UsageError(errors.New("--mode refuse: a sink that refuses connections is a port nothing listens on; point the sink's URL at a closed loopback port instead of running a receiver"))
	default:
		return exitcode.UsageError(fmt.Errorf("--mode %q: want ok or hang", o.Mode))
	}
	if err := requireLoopbackHostPort(o.Listen); err != nil {
		return exitcode.UsageError(fmt.Errorf("--listen: %w", err))
	}
	if o.Control != "" {
		if err := requireLoopbackHostPort(o.Control); err != nil {
			return exitcode.UsageError(fmt.Errorf("--control: %w", err))
		}
	}
	if o.Secret == "" {
		return exitcode.UsageError(errors.New("--secret is required (the sink's whsec_ secret)"))
	}
	if o.RateWindow <= 0 {
		return exitcode.UsageError(fmt.Errorf("--rate-window %s must be positive", o.RateWindow))
	}
	return nil
}

// Addr is the address the receiver listens on.
func (rc *Receiver) Addr() string { return rc.ln.Addr().String() }

// ControlAddr is the control listener's address ("" without one).
func (rc *Receiver) ControlAddr() string {
	if rc.ctlLn == nil {
		return ""
	}
	return rc.ctlLn.Addr().String()
}

// Mode is the current mode.
func (rc *Receiver) Mode() string { return rc.mode.Load().(string) }

// SetMode switches the mode (ok or hang); requests already held stay held until their client
// gives up.
func (rc *Receiver) SetMode(mode string) {
	rc.mode.Store(mode)
	rc.book.setMode(mode, time.Now())
}

// Stats is the tally so far.
func (rc *Receiver) Stats() ReceiverStats {
	st := rc.book.stats(rc.o.RateWindow)
	st.Listen = rc.o.Listen
	if rc.ln != nil {
		st.Listen = rc.Addr()
	}
	return st
}

// Records is every request booked so far (only with RequestsOut), in the order answered.
func (rc *Receiver) Records() []ReceiverRecord {
	rc.book.mu.Lock()
	defer rc.book.mu.Unlock()
	return slices.Clone(rc.book.records)
}

// Stop lets held requests go (their connections are closed unanswered) and stops serving.
func (rc *Receiver) Stop() {
	select {
	case <-rc.quit:
	default:
		close(rc.quit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range []*http.Server{rc.srv, rc.ctl} {
		if s != nil {
			if s.Shutdown(ctx) != nil {
				_ = s.Close()
			}
		}
	}
	rc.done.Wait()
}

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	now := time.Now()
	mode := rc.Mode()
	rec := ReceiverRecord{ID: r.Header.Get(signature.HeaderWebhookID), At: now, Mode: mode}
	var nb notificationBody
	decodeErr := json.Unmarshal(body, &nb)
	if decodeErr == nil {
		rec.Type, rec.Provider, rec.MessageID, rec.Version = nb.Type, nb.Data.Provider, nb.Data.MessageID, nb.Data.Version
	}
	rc.book.arrive(rec)
	defer rc.book.leave()
	if mode == ReceiverHang {
		rc.book.hold(rec, 1)
		defer rc.book.hold(rec, -1)
		select {
		case <-r.Context().Done(): // the client gave up
		case <-rc.quit:
		}
		// Close the connection without an answer (net/http logs nothing for this panic).
		panic(http.ErrAbortHandler)
	}
	if err == nil {
		err = rc.scheme.Verify(rec.ID, r.Header.Get(signature.HeaderWebhookTimestamp), r.Header.Get(signature.HeaderWebhookSignature), body, now)
	}
	if err != nil {
		rc.book.mu.Lock()
		rc.book.badSig++
		rc.book.mu.Unlock()
		rec.Code = http.StatusUnauthorized
		rc.book.answer(rec, time.Now())
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if decodeErr != nil {
		rc.book.mu.Lock()
		rc.book.badBody++
		rc.book.mu.Unlock()
	}
	rec.Code = http.StatusOK
	rc.book.answer(rec, time.Now())
	w.WriteHeader(http.StatusOK)
}

func (rc *Receiver) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rc.Stats())
	})
	mux.HandleFunc("POST /mode", func(w http.ResponseWriter, r *http.Request) {
		m := r.URL.Query().Get("mode")
		if m != ReceiverOK && m != ReceiverHang {
			http.Error(w, "mode: want ok or hang", http.StatusBadRequest)
			return
		}
		rc.SetMode(m)
		fmt.Fprintln(w, m)
	})
	return mux
}

// writeFiles writes the tally (and the request log) once the receiver has stopped.
func (rc *Receiver) writeFiles() error {
	if rc.o.Out != "" {
		if err := WriteJSON(rc.o.Out, rc.Stats()); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if rc.o.RequestsOut != "" {
		f, err := os.Create(rc.o.RequestsOut)
		if err != nil {
			return fmt.Errorf("--requests-out: %w", err)
		}
		w := bufio.NewWriter(f)
		recs := rc.Records()
		sort.SliceStable(recs, func(i, j int) bool { return recs[i].At.Before(recs[j].At) })
		enc := json.NewEncoder(w)
		for _, r := range recs {
			if err := enc.Encode(r); err != nil {
				f.Close()
				return fmt.Errorf("--requests-out: %w", err)
			}
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return fmt.Errorf("--requests-out: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("--requests-out: %w", err)
		}
	}
	return nil
}

// RunReceiver serves until ctx ends (SIGTERM or SIGINT in the command), switching to ok on
// SIGUSR1 and to hang on SIGUSR2, then writes its files.
func RunReceiver(ctx context.Context, o ReceiverOptions, out io.Writer) error {
	rc, err := StartReceiver(o)
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	ctl := ""
	if a := rc.ControlAddr(); a != "" {
		ctl = "; control on http://" + a + " (GET /stats, POST /mode?mode=ok|hang)"
	}
	fmt.Fprintf(out, "receiver on %s, mode %s%s; SIGUSR1 → ok, SIGUSR2 → hang; SIGTERM writes %s\n", rc.Addr(), rc.Mode(), ctl, o.Out)
loop:
	for {
		select {
		case s := <-sigs:
			m := ReceiverOK
			if s == syscall.SIGUSR2 {
				m = ReceiverHang
			}
			rc.SetMode(m)
			fmt.Fprintf(out, "%s mode %s\n", time.Now().UTC().Format(time.RFC3339), m)
		case <-ctx.Done():
			break loop
		}
	}
	rc.Stop()
	st := rc.Stats()
	fmt.Fprintf(out, "receiver stopped: %d requests, %d answered 200 (%d distinct ids, %d more than once), %d order violations, at most %d in %s, at most %d held at once\n",
		st.Requests, st.Answered2xx, st.DistinctIDs2xx, st.DuplicateIDs, st.OrderViolations, st.MaxAnsweredInWindow, o.RateWindow, st.MaxHeld)
	return rc.writeFiles()
}

func receiverCommand() *cobra.Command {
	o := ReceiverOptions{}
	cmd := &cobra.Command{
		Use:   "receiver",
		Short: "A second downstream sink for outage benchmarks: answers (ok) or holds every request (hang)",
		Long: `receiver is a downstream sink to configure as a second mailhook sink (its URL http://<--listen>/,
its secret --secret). In mode ok it verifies each request's Standard Webhooks signature and
answers 200 (401 for a bad one), recording the webhook-id, data.provider, data.message_id,
data.version and arrival time of each; in mode hang it reads each request and never answers,
holding the connection until the client gives up. SIGUSR1 (or POST /mode?mode=ok on --control)
switches to ok without leaving the port, SIGUSR2 (mode=hang) back. A sink that refuses
connections needs no receiver: point its URL at a loopback port nothing listens on (--mode
refuse is rejected for that reason). On SIGTERM or SIGINT it writes --out: requests, 200s,
distinct ids, ids answered 200 more than once, per-message version-order violations, the most
200s in any --rate-window, the most connections and requests held at once, and the first and
last request. Loopback addresses only.`,
		Example: `  mailhook-loadtest receiver --listen 127.0.0.1:19200 --control 127.0.0.1:19201 \
    --secret whsec_… --mode hang --out /tmp/down.json
  curl -X POST 'http://127.0.0.1:19201/mode?mode=ok'     # or: kill -USR1 <pid>`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return RunReceiver(c.Context(), o, c.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", "127.0.0.1:9200", "address to listen on (loopback)")
	f.StringVar(&o.Control, "control", "", "address of the control listener (loopback): GET /stats, POST /mode?mode=ok|hang; empty: none")
	f.StringVar(&o.Secret, "secret", "", "the sink's whsec_ secret, to verify signatures")
	f.StringVar(&o.Mode, "mode", ReceiverOK, "ok (verify and answer 200) or hang (never answer); refuse is a closed port, not a receiver")
	f.StringVar(&o.Out, "out", "", "write the tally here (JSON) when stopped")
	f.StringVar(&o.RequestsOut, "requests-out", "", "write every request here (JSON lines) when stopped")
	f.DurationVar(&o.RateWindow, "rate-window", time.Second, "window of the highest answered count (sliding)")
	return cmd
}
