// Package inbox is mailhook's high-throughput accept path (acceptance.mode: inbox): the webhook
// handler inserts verified events into PostgreSQL's webhook_events and answers from the insert
// alone, and a relay in every worker process starts their workflows afterwards. The durable
// dedupe (the table's primary key) answers duplicates; the workflow ID provider:event_id still
// makes every start idempotent, so relays that race, crash or overlap with a redrive never run an
// event twice.
package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mailhook/mailhook/internal/event"
	"github.com/mailhook/mailhook/internal/ingest"
)

// Store is the part of the store the accept side uses.
type Store interface {
	Enqueue(ctx context.Context, evs []event.Event) ([]bool, error)
	NotifyInbox(ctx context.Context) error
}

// Acceptor accepts events into the inbox and wakes the relays.
type Acceptor struct {
	Store Store
	Log   *slog.Logger
	// NotifyEvery is the shortest gap between two NOTIFYs (default 5 ms). A NOTIFY takes a
	// database-wide lock at commit; sending one per request would serialize the accept path at
	// high rates, so requests only poke a goroutine that sends one for all of them.
	NotifyEvery time.Duration
	// Timeout bounds the insert (default 5 s), so a hung database gives a prompt 503.
	Timeout time.Duration

	poke chan struct{}
}

// NewAcceptor returns an acceptor; Run must run for the relays to be woken (without it they
// still poll).
func NewAcceptor(st Store, log *slog.Logger) *Acceptor {
	if log == nil {
		log = slog.Default()
	}
	return &Acceptor{Store: st, Log: log, NotifyEvery: 5 * time.Millisecond, Timeout: 5 * time.Second, poke: make(chan struct{}, 1)}
}

// Accept records the events with one INSERT and reports each as accepted (inserted now) or a
// duplicate (recorded before). An error means nothing can be said to be durable: answer 503.
func (a *Acceptor) Accept(ctx context.Context, evs []event.Event) ([]ingest.Status, error) {
	if a.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.Timeout)
		defer cancel()
	}
	inserted, err := a.Store.Enqueue(ctx, evs)
	if err != nil {
		return nil, fmt.Errorf("accept into inbox: %w", err)
	}
	out := make([]ingest.Status, len(evs))
	insertedAny := false
	for i, ins := range inserted {
		out[i] = ingest.Duplicate
		if ins {
			out[i] = ingest.Accepted
			insertedAny = true
		}
	}
	if insertedAny {
		select {
		case a.poke <- struct{}{}:
		default: // a NOTIFY is already due; it covers these rows too
		}
	}
	return out, nil
}

// Run sends the NOTIFYs that Accept asks for until ctx ends. A lost NOTIFY (error, crash) only
// delays the events until the relays' next poll.
func (a *Acceptor) Run(ctx context.Context) {
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
