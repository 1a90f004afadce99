// Package acceptance is the event's way in, from a verified webhook to its started workflow. Its
// events are checked against what the store can keep (store.Storable), inserted into
// PostgreSQL's webhook_events under their unique key (provider, event_id), and answered from that
// insert alone: accepted, duplicate, or rejected with a reason (Acceptor). Nothing is answered
// 200 before its row is committed, and a duplicate costs one index probe, never a Temporal call.
// The process that accepted the events then starts their workflows at once (Handoff); a relay in
// every worker process starts whatever it could not (Relay); while PostgreSQL is down, the
// events are accepted by starting their workflows with the events in the input (through.go).
// Every start goes through the one start.Starter (internal/start), which says how a start can
// end. The workflow ID provider:event_id makes every start idempotent, so a handoff, relays and
// a redrive that overlap never run an event twice.
package acceptance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store"
)

// Store is the part of the store the accept side uses.
type Store interface {
	EnqueueRows(ctx context.Context, rows []store.InboxRow, hold time.Duration) ([]bool, error)
}

// Status is what happened to one event of a request.
type Status string

const (
	// Accepted: inserted now; its workflow is started next.
	Accepted Status = "accepted"
	// Duplicate: recorded before, by this request or an earlier one; nothing more happens.
	Duplicate Status = "duplicate"
	// Rejected: it can never be stored as it is (Verdict.Err says why); nothing was written.
	Rejected Status = "rejected"
)

// Verdict is one event's answer.
type Verdict struct {
	Status Status
	// Err, when Rejected, is why. What the sender must fix is its innermost cause, which is
	// safe to send back.
	Err error
}

// Offerer takes accepted events to start their workflows now (Handoff). ctx is the accepting
// request's, for its trace; the starts outlive it.
type Offerer interface {
	Offer(ctx context.Context, evs []domain.Event)
}

// Acceptor makes events durable and answers for each.
//
// While Run runs, requests that arrive together share one INSERT (group commit): a few writer
// goroutines each take every request waiting at that moment, up to MaxBatchEvents events, and
// insert them with one statement in one transaction. Nothing waits for a batch to fill: a lone
// request is inserted at once; under load the requests that queued behind a running insert go
// in the next one. Each request still answers from its own rows. When PostgreSQL refuses a
// shared insert's data, the requests are inserted again one at a time, and a request's events
// one at a time, so only the event PostgreSQL refuses is rejected. Without Run, each request
// inserts on its own.
type Acceptor struct {
	Store Store
	Log   *slog.Logger
	// Handoff, when set, is given the events each insert accepted.
	Handoff Offerer
	// Hold is how long relays leave a new row to the Handoff before starting it themselves.
	Hold time.Duration
	// Timeout bounds a request's wait for a writer, and a writer's insert (default 5 s), so a
	// hung database gives a prompt 503 well inside the HTTP write timeout.
	Timeout time.Duration
	// Writers is how many INSERTs may run at once (default 4), MaxBatchEvents how many events
	// one of them takes at most (default 500; a larger request goes alone).
	Writers        int
	MaxBatchEvents int
	// Metrics, when set, observes each insert (events and requests per statement).
	Metrics *metrics.Metrics
	// Through, when set, accepts the events of a request whose insert failed because
	// PostgreSQL is unavailable (store.IsUnavailable) by starting their workflows with the
	// events in the input (through.go). Nil: such a request is answered 503.
	Through       start.AcceptStarter
	throughLogged atomic.Int64 // unix nanoseconds of the last "accepting through Temporal" line

	queue   chan *request
	writing atomic.Bool // Run's writers take requests
	// inserts and reqs count the INSERT statements run and the requests they carried, for the
	// tests' view of group commit (export_test.go); the metrics count the same.
	inserts atomic.Int64
	reqs    atomic.Int64
}

type request struct {
	rows []store.InboxRow
	done chan []rowResult // buffered: the writer never blocks on a request that gave up
	// state says who owns the request: queued (nobody yet), taken by a writer, or abandoned by
	// its caller before any writer took it. Exactly one of the writer and the caller wins it.
	state atomic.Int32
}

const (
	queued int32 = iota
	taken
	abandoned
)

// rowResult is one row's insert: inserted or not (a duplicate), refused (its data), or err (the
// insert could not run; nothing can be said).
type rowResult struct {
	inserted bool
	refused  error
	err      error
}

// NewAcceptor returns an acceptor with the defaults.
func NewAcceptor(st Store, log *slog.Logger) *Acceptor {
	if log == nil {
		log = slog.Default()
	}
	return &Acceptor{Store: st, Log: log, Timeout: 5 * time.Second, Writers: 4, MaxBatchEvents: 500,
		queue: make(chan *request, 1024)}
}

// Accept checks and records the events and gives one verdict per event, in order. An error
// means nothing can be said to be durable (PostgreSQL unavailable, no writer free within
// Timeout, or an insert slower than Timeout): answer 503. A request whose insert has begun
// waits for its outcome (at most Timeout more), so an insert that commits is answered 200.
func (a *Acceptor) Accept(ctx context.Context, evs []domain.Event) ([]Verdict, error) {
	out := make([]Verdict, len(evs))
	reject := func(i int, err error) { out[i] = Verdict{Status: Rejected, Err: err} }
	// Each event's own fields first; then its body, once per body (shareRaw): checking a shared
	// body once per event would cost as much as storing it once per event.
	for i, ev := range evs {
		ev.Raw = nil
		if err := store.Storable(ev); err != nil {
			reject(i, err)
		}
	}
	evs = slices.Clone(evs) // shareRaw changes them; the caller's stay as parsed
	shareRaw(evs, func(i int) bool { return out[i].Status == "" })
	badBody := map[string]error{} // by the id of the event holding it
	for i, ev := range evs {
		if out[i].Status == "" && len(ev.Raw) > 0 {
			if err := store.Storable(ev); err != nil {
				reject(i, err)
				badBody[ev.EventID] = err
			}
		}
	}
	for i, ev := range evs {
		if err, bad := badBody[ev.RawOf]; bad && ev.RawOf != "" && out[i].Status == "" {
			reject(i, err)
		}
	}
	rows := make([]store.InboxRow, 0, len(evs))
	at := make([]int, 0, len(evs)) // rows[j] is evs[at[j]]
	for i, ev := range evs {
		if out[i].Status != "" {
			continue
		}
		r, err := store.NewInboxRow(ev)
		if err != nil {
			out[i] = Verdict{Status: Rejected, Err: err}
			continue
		}
		rows, at = append(rows, r), append(at, i)
	}
	if len(rows) == 0 {
		return out, nil
	}
	reqCtx := ctx
	if a.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.Timeout)
		defer cancel()
	}
	var (
		results []rowResult
		err     error
	)
	if a.writing.Load() {
		results, err = a.viaWriters(reqCtx, ctx, rows)
	} else {
		results = a.insert(ctx, [][]store.InboxRow{rows})[0]
		a.counted(1, len(rows))
	}
	if err == nil {
		for _, r := range results {
			if r.err != nil {
				err = r.err
				break
			}
		}
	}
	if err != nil {
		// A request whose client is gone or whose deadline passed gets no runs started for it:
		// nobody reads the answer, and the sender's retry finds whatever was stored.
		if a.Through != nil && store.IsUnavailable(err) && reqCtx.Err() == nil {
			return a.throughTemporal(reqCtx, evs, at, out, err)
		}
		return nil, fmt.Errorf("accept: %w", err)
	}
	var accepted []domain.Event
	for j, r := range results {
		i := at[j]
		switch {
		case r.refused != nil:
			out[i] = Verdict{Status: Rejected, Err: r.refused}
		case r.inserted:
			out[i] = Verdict{Status: Accepted}
			accepted = append(accepted, evs[i])
		default:
			out[i] = Verdict{Status: Duplicate}
		}
	}
	if len(accepted) > 0 && a.Handoff != nil {
		a.Handoff.Offer(ctx, accepted)
	}
	return out, nil
}

var errStopped = errors.New("acceptor stopped")

// viaWriters has a writer insert rows. ctx (the insert timeout) bounds the wait for a writer to
// take the request; once one has, the request waits for the insert's outcome, which the writer
// bounds by its own timeout, so the answer says what PostgreSQL did: a request that gave up on an
// insert still running was answered 503 (or accepted through Temporal) while its rows were
// committed a moment later, which on a starved machine happened to valid traffic every minute.
// reqCtx (the request's own: client gone, AnswerWithin passed) ends every wait.
func (a *Acceptor) viaWriters(reqCtx, ctx context.Context, rows []store.InboxRow) ([]rowResult, error) {
	req := &request{rows: rows, done: make(chan []rowResult, 1)}
	select {
	case a.queue <- req:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for a writer: %w", ctx.Err())
	}
	select {
	case res := <-req.done:
		return res, nil
	case <-ctx.Done():
	}
	if req.state.CompareAndSwap(queued, abandoned) {
		// No writer took it, and none will: nothing of it was written.
		return nil, fmt.Errorf("wait for a writer: %w", ctx.Err())
	}
	select {
	case res := <-req.done:
		return res, nil
	case <-reqCtx.Done():
		return nil, fmt.Errorf("wait for the insert: %w", context.Cause(reqCtx))
	}
}

// insert inserts the requests' rows with one statement and returns each request's results. When
// PostgreSQL refuses the data, it inserts again one request at a time, and a request's rows one
// at a time, so that only the refused row fails; a shared insert that fails otherwise fails
// every request.
func (a *Acceptor) insert(ctx context.Context, reqs [][]store.InboxRow) [][]rowResult {
	var all []store.InboxRow
	for _, r := range reqs {
		all = append(all, r...)
	}
	inserted, err := a.Store.EnqueueRows(ctx, all, a.Hold)
	out := make([][]rowResult, len(reqs))
	if err == nil || !errors.Is(err, domain.ErrNotStorable) || len(all) == 1 {
		off := 0
		for i, r := range reqs {
			out[i] = make([]rowResult, len(r))
			for j := range r {
				switch {
				case err == nil:
					out[i][j].inserted = inserted[off+j]
				case errors.Is(err, domain.ErrNotStorable):
					out[i][j].refused = err
				default:
					out[i][j].err = err
				}
			}
			off += len(r)
		}
		return out
	}
	a.Log.Warn("PostgreSQL refused a shared insert's data; inserting its events one at a time",
		"requests", len(reqs), "events", len(all), "error", err)
	if len(reqs) == 1 {
		for _, row := range reqs[0] {
			out[0] = append(out[0], a.insert(ctx, [][]store.InboxRow{{row}})[0]...)
			a.counted(0, 1)
		}
		return out
	}
	for i, r := range reqs {
		out[i] = a.insert(ctx, [][]store.InboxRow{r})[0]
		a.counted(0, len(r))
	}
	return out
}

// Run runs the insert writers until ctx ends.
func (a *Acceptor) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range max(a.Writers, 1) {
		wg.Go(func() { a.write(ctx) })
	}
	a.writing.Store(true) // from now on Accept goes through the writers
	<-ctx.Done()
	a.writing.Store(false)
	wg.Wait()
}

// write takes the requests waiting now (at least one) and inserts them with one statement.
func (a *Acceptor) write(ctx context.Context) {
	for {
		var batch []*request
		select {
		case <-ctx.Done():
			a.failQueued()
			return
		case r := <-a.queue:
			if r.state.CompareAndSwap(queued, taken) {
				batch = append(batch, r)
			}
		}
		if len(batch) == 0 {
			continue // its caller gave up waiting before a writer was free
		}
		n := len(batch[0].rows)
	more:
		for n < a.MaxBatchEvents {
			select {
			case r := <-a.queue:
				if r.state.CompareAndSwap(queued, taken) {
					batch = append(batch, r)
					n += len(r.rows)
				}
			default:
				break more
			}
		}
		reqs := make([][]store.InboxRow, len(batch))
		for i, r := range batch {
			reqs[i] = r.rows
		}
		// The requests may have given up already; the insert still completes on its own
		// clock so that what it wrote is answered consistently to whoever still waits.
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(a.Timeout, 5*time.Second))
		results := a.insert(ictx, reqs)
		cancel()
		a.counted(len(batch), n)
		for i, r := range batch {
			r.done <- results[i]
		}
	}
}

func (a *Acceptor) counted(requests, events int) {
	a.inserts.Add(1)
	a.reqs.Add(int64(requests))
	a.Metrics.InboxInsert(requests, events)
}

// failQueued answers the requests still queued when the acceptor stops (after the HTTP server
// has drained there are none; this is for an abrupt stop).
func (a *Acceptor) failQueued() {
	for {
		select {
		case r := <-a.queue:
			if !r.state.CompareAndSwap(queued, taken) {
				continue
			}
			res := make([]rowResult, len(r.rows))
			for i := range res {
				res[i].err = errStopped
			}
			r.done <- res
		default:
			return
		}
	}
}
