package acceptance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/start"
)

// throughConcurrency bounds the starts of one request's events through Temporal: a batch of
// 500 is started in a few round trips, and one request cannot take every connection to Temporal.
const throughConcurrency = 16

// throughTemporal accepts the events PostgreSQL could not take (insertErr) by starting each
// one's workflow with the event in its input: Temporal then holds it durably under the same
// key, provider:event_id, and the run's first step stores it once PostgreSQL is back. A start
// that finds the workflow already there (a re-send during the outage, or an event recorded and
// run before it) is a duplicate. Only when every event is held is the request accepted: one
// start that fails, or an event too large for a workflow input, fails the request with both
// causes (503), and the provider's retry finds the events already started as duplicates. A
// start that ran out of time is asked once more (seen in TestFaultsTogether: a start outlasting
// start_timeout while PostgreSQL was read-only answered the request 503 with Temporal up).
//
// Once the request's client is gone or its deadline has passed, no further start begins (those
// under way finish): the request is answered 503, which nobody reads, and its runs are those of
// the events started, each of which stores its row, so rows and runs still agree.
func (a *Acceptor) throughTemporal(ctx context.Context, evs []domain.Event, at []int, out []Verdict, insertErr error) ([]Verdict, error) {
	reqCtx := ctx
	ctx = context.WithoutCancel(ctx) // the starts finish on their own timeout, as the insert does
	var (
		mu       sync.Mutex
		firstErr error
		started  int
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, throughConcurrency)
	for _, i := range at {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if reqCtx.Err() != nil {
				mu.Lock()
				defer mu.Unlock()
				if firstErr == nil {
					firstErr = fmt.Errorf("the request ended before its events were started: %w", context.Cause(reqCtx))
				}
				return
			}
			st, err := a.Through.StartAccepted(ctx, evs[i])
			if start.IsUncertain(err) && reqCtx.Err() == nil {
				// The start ran out of time, and a slow Temporal has most often created the run
				// all the same: ask once more under the same workflow ID while the client still
				// waits. "Already started" then says Temporal holds the event (this request's
				// first ask made the run, or a re-send's did), so the request is answered 200
				// rather than 503 and a re-send. Once only: slow twice is a 503, as before.
				if _, again := a.Through.StartAccepted(ctx, evs[i]); again == nil {
					st, err = start.Started, nil
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if firstErr == nil {
					firstErr = err
				}
			case st == start.AlreadyStarted:
				out[i] = Verdict{Status: Duplicate}
			default:
				out[i] = Verdict{Status: Accepted}
				started++
				a.Metrics.AcceptedThroughTemporal(evs[i].Provider)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		if errors.Is(firstErr, start.ErrTooLarge) {
			a.Log.WarnContext(ctx, "PostgreSQL is unavailable and an event is too large to accept through Temporal; answering 503",
				"provider", evs[at[0]].Provider, "error", firstErr)
		}
		return nil, fmt.Errorf("accept: %w; through Temporal: %w", insertErr, firstErr)
	}
	if now := time.Now().UnixNano(); now-a.throughLogged.Load() > int64(10*time.Second) {
		a.throughLogged.Store(now)
		a.Log.WarnContext(ctx, "PostgreSQL is unavailable; accepting webhooks through Temporal (their runs store them once it is back)",
			"provider", evs[at[0]].Provider, "started", started, "events", len(at), "error", insertErr)
	}
	return out, nil
}
