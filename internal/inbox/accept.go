// Package inbox is mailhook's high-throughput accept path (acceptance.mode: inbox): the webhook
// handler inserts verified events into PostgreSQL's webhook_events and answers from the insert
// alone, and a relay in every worker process starts their workflows afterwards. The durable
// dedupe (the table's primary key) answers duplicates; the workflow ID provider:event_id still
// makes every start idempotent, so relays that race, crash or overlap with a redrive never run an
// event twice.
package inbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailhook/mailhook/internal/event"
	"github.com/mailhook/mailhook/internal/ingest"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/store"
)

// Store is the part of the store the accept side uses.
type Store interface {
	EnqueueRows(ctx context.Context, rows []store.InboxRow) ([]bool, error)
	NotifyInbox(ctx context.Context) error
}

// Acceptor accepts events into the inbox and wakes the relays.
//
// While Run runs, requests that arrive together share one INSERT (group commit): a few writer
// goroutines each take every request waiting at that moment, up to MaxBatchEvents events, and
// insert them with one statement in one transaction. Nothing waits for a batch to fill: a lone
// request is inserted at once; under load the requests that queued behind a running insert go
// in the next one. Each request still answers from its own rows, and a request's events are
// never split across statements. Without Run, each request inserts on its own.
type Acceptor struct {
	Store Store
	Log   *slog.Logger
	// NotifyEvery is the shortest gap between two NOTIFYs (default 5 ms). A NOTIFY takes a
	// database-wide lock at commit; sending one per request would serialize the accept path at
	// high rates, so requests only poke a goroutine that sends one for all of them.
	NotifyEvery time.Duration
	// Timeout bounds a request's wait for its insert (default 5 s), so a hung database gives a
	// prompt 503.
	Timeout time.Duration
	// Writers is how many INSERTs may run at once (default 4), MaxBatchEvents how many events
	// one of them takes at most (default 500; a larger request goes alone).
	Writers        int
	MaxBatchEvents int
	// Metrics, when set, observes each insert (events and requests per statement).
	Metrics *metrics.Metrics

	poke    chan struct{}
	queue   chan *request
	writing atomic.Bool // Run's writers take requests
	inserts atomic.Int64
	reqs    atomic.Int64
}

// Stats counts the INSERT statements run and the requests they carried.
type Stats struct{ Inserts, Requests int64 }

// Stats returns the counts so far.
func (a *Acceptor) Stats() Stats { return Stats{Inserts: a.inserts.Load(), Requests: a.reqs.Load()} }

type request struct {
	rows []store.InboxRow
	done chan result // buffered: the writer never blocks on a request that gave up
}

type result struct {
	inserted []bool
	err      error
}

// NewAcceptor returns an acceptor with the defaults.
func NewAcceptor(st Store, log *slog.Logger) *Acceptor {
	if log == nil {
		log = slog.Default()
	}
	return &Acceptor{Store: st, Log: log, NotifyEvery: 5 * time.Millisecond, Timeout: 5 * time.Second,
		Writers: 4, MaxBatchEvents: 500, poke: make(chan struct{}, 1), queue: make(chan *request, 1024)}
}

// Accept records the events and reports each as accepted (inserted now) or a duplicate
// (recorded before). An error means nothing can be said to be durable: answer 503 (or 400 for
// store.ErrNotStorable). A request that times out may still be inserted afterwards; its retry
// is then a duplicate, as it should be.
func (a *Acceptor) Accept(ctx context.Context, evs []event.Event) ([]ingest.Status, error) {
	rows := make([]store.InboxRow, len(evs))
	for i, ev := range evs {
		r, err := store.NewInboxRow(ev)
		if err != nil {
			return nil, fmt.Errorf("accept into inbox: %w", err)
		}
		rows[i] = r
	}
	if a.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.Timeout)
		defer cancel()
	}
	var (
		inserted []bool
		err      error
	)
	if a.writing.Load() {
		inserted, err = a.viaWriters(ctx, rows)
	} else {
		inserted, err = a.Store.EnqueueRows(ctx, rows)
		a.counted(1, len(rows))
	}
	if err != nil {
		return nil, fmt.Errorf("accept into inbox: %w", err)
	}
	out := make([]ingest.Status, len(evs))
	woke := false
	for i, ins := range inserted {
		out[i] = ingest.Duplicate
		if ins {
			out[i] = ingest.Accepted
			woke = true
		}
	}
	if woke {
		select {
		case a.poke <- struct{}{}:
		default: // a NOTIFY is already due; it covers these rows too
		}
	}
	return out, nil
}

var errStopped = errors.New("inbox acceptor stopped")

func (a *Acceptor) viaWriters(ctx context.Context, rows []store.InboxRow) ([]bool, error) {
	req := &request{rows: rows, done: make(chan result, 1)}
	select {
	case a.queue <- req:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for an inbox writer: %w", ctx.Err())
	}
	select {
	case res := <-req.done:
		return res.inserted, res.err
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the inbox insert: %w", ctx.Err())
	}
}

// Run runs the insert writers and sends the NOTIFYs that Accept asks for, until ctx ends. A lost
// NOTIFY (error, crash) only delays the events until the relays' next poll.
func (a *Acceptor) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range max(a.Writers, 1) {
		wg.Go(func() { a.write(ctx) })
	}
	a.writing.Store(true) // from now on Accept goes through the writers
	defer func() {
		a.writing.Store(false)
		wg.Wait()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.poke:
		}
		nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := a.Store.NotifyInbox(nctx); err != nil && ctx.Err() == nil {
			a.Log.Warn("inbox notify failed; relays will find the events at their next poll", "error", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.NotifyEvery):
		}
	}
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
			batch = append(batch, r)
		}
		n := len(batch[0].rows)
	more:
		for n < a.MaxBatchEvents {
			select {
			case r := <-a.queue:
				batch = append(batch, r)
				n += len(r.rows)
			default:
				break more
			}
		}
		rows := make([]store.InboxRow, 0, n)
		for _, r := range batch {
			rows = append(rows, r.rows...)
		}
		// The requests may have given up already; the insert still completes on its own
		// clock so that what it wrote is answered consistently to whoever still waits.
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(a.Timeout, 5*time.Second))
		inserted, err := a.Store.EnqueueRows(ictx, rows)
		cancel()
		a.counted(len(batch), n)
		off := 0
		for _, r := range batch {
			res := result{err: err}
			if err == nil {
				res.inserted = inserted[off : off+len(r.rows)]
			}
			off += len(r.rows)
			r.done <- res
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
			r.done <- result{err: errStopped}
		default:
			return
		}
	}
}
