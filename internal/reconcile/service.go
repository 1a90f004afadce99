// Package reconcile is mailhook's daily reconciliation and its operator tools: the daily report
// (per provider and event type, received / processed / unprocessed), the redrive of events
// recorded but never processed, the replay of a stored event, and the Temporal Schedule that
// runs DailyReconcile every day. The CLI (mailhook report|redrive|replay), the admin API and
// the DailyReconcile activities all call the same code here.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store"
)

// ReplayStore is the replays' part of the store reconciliation uses (store.Replays).
type ReplayStore interface {
	StuckEvents(ctx context.Context, olderThan time.Duration, limit int, quarantined bool) ([]store.RecordedEvent, bool, error)
	RecordedEvent(ctx context.Context, provider, eventID string) (store.RecordedEvent, error)
	ReserveReplay(ctx context.Context, provider, eventID, workflowIDPrefix string, renotify bool, actor string) (int, error)
	DeleteReplay(ctx context.Context, provider, eventID string, n int) error
	Requeue(ctx context.Context, provider, eventID string, relayAfter time.Duration) error
	MarkRedriven(ctx context.Context, provider, eventID string) error
}

// requeueGrace is how long a requeued event waits before a relay may start it: long enough for
// the redrive's own start to settle it, so the relay does not start it too (only a duplicate).
const requeueGrace = time.Minute

// Service runs reports, redrives and replays against one store and Temporal namespace.
type Service struct {
	// Reports are the daily counts a report is built from (store.Counts).
	Reports  ReportSource
	Replays  ReplayStore
	Temporal client.Client
	// Starter is the process's one starter: a redrive starts an event exactly as the webhook
	// handler does (routing by the current sinks, workflow ID provider:event_id), a replay under
	// its own ID.
	Starter *start.Starter
	Log     *slog.Logger
	Now     func() time.Time
}

// New builds the service from the process's config.
func New(reports ReportSource, replays ReplayStore, c client.Client, starter *start.Starter, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{
		Reports:  reports,
		Replays:  replays,
		Temporal: c,
		Starter:  starter,
		Log:      log,
		Now:      time.Now,
	}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Redrive starts ProcessEvent for every event recorded more than in.OlderThan ago and
// still unprocessed (oldest first, at most in.Limit), rebuilding each workflow input from the
// stored normalized event: the events out of quarantine, or with in.Quarantined only the
// quarantined ones (which leave the quarantine once started). An event whose workflow is still
// open is a duplicate start and is reported as running; one recorded before the normalized
// column existed is skipped. Only a failure to list the events is an error; a failed start is
// reported per event.
func (s *Service) Redrive(ctx context.Context, in domain.RedriveInput) (domain.RedriveResult, error) {
	if in.OlderThan < 0 {
		return domain.RedriveResult{}, fmt.Errorf("redrive: older_than %s is negative", in.OlderThan)
	}
	limit := in.Limit
	if limit <= 0 {
		limit = domain.DefaultRedriveLimit
	}
	stuck, more, err := s.Replays.StuckEvents(ctx, in.OlderThan, limit, in.Quarantined)
	if err != nil {
		return domain.RedriveResult{}, fmt.Errorf("redrive: %w", err)
	}
	res := domain.RedriveResult{OlderThan: in.OlderThan.String(), More: more, Events: []domain.RedriveOutcome{}}
	for _, rec := range stuck {
		o := domain.RedriveOutcome{Provider: rec.Provider, EventID: rec.EventID, EventType: rec.Type, ReceivedAt: rec.ReceivedAt}
		switch {
		case rec.Event == nil:
			o.Outcome, o.Error = domain.RedriveSkipped, rec.Missing.Error()
		default:
			// Out of quarantine before the start, never after: the run may quarantine it
			// again before Start returns.
			if in.Quarantined {
				if err := s.Replays.Requeue(ctx, rec.Provider, rec.EventID, requeueGrace); err != nil {
					o.Outcome, o.Error = domain.RedriveFailed, err.Error()
					break
				}
			}
			st, err := s.Starter.Start(ctx, *rec.Event)
			switch {
			case err != nil:
				o.Outcome, o.Error = domain.RedriveFailed, err.Error()
			case st == start.AlreadyStarted:
				o.Outcome = domain.RedriveRunning
			default:
				o.Outcome = domain.RedriveStarted
			}
			// An event waiting for its start is started now: out of the inbox, so the relay
			// does not try again (it would only get a duplicate). One whose start failed stays
			// there, and the relay starts it (or quarantines it again if Temporal refuses it
			// for good).
			if err == nil {
				if merr := s.Replays.MarkRedriven(ctx, rec.Provider, rec.EventID); merr != nil {
					s.Log.Warn("redrive: could not take the event out of the inbox; a relay may start it again (a duplicate)", "provider", rec.Provider, "event_id", rec.EventID, "error", merr)
				}
			}
		}
		if o.Outcome != domain.RedriveRunning {
			s.Log.Info("redrive", "provider", o.Provider, "event_id", o.EventID, "outcome", o.Outcome, "error", o.Error)
		}
		res.Add(o)
	}
	return res, nil
}

// ReplayResult is a started replay.
type ReplayResult struct {
	Provider   string `json:"provider"`
	EventID    string `json:"event_id"`
	Replay     int    `json:"replay"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Renotify   bool   `json:"renotify"`
	// Result is the run's result when the caller waited for it.
	Result *domain.Result `json:"result,omitempty"`
}

// ErrCannotReplay wraps a replay refused because of the event itself (not found, or recorded
// without a normalized event).
var ErrCannotReplay = errors.New("cannot replay")

// ReplayWorkflowID is the workflow ID of replay n of an event.
func ReplayWorkflowID(provider, eventID string, n int) string {
	return replayPrefix(provider, eventID) + strconv.Itoa(n)
}

func replayPrefix(provider, eventID string) string { return provider + ":" + eventID + ":replay:" }

// Replay re-runs a recorded event as replay n (1 + the replays before it, kept in the replays
// table) under workflow ID provider:event_id:replay:<n>. Without renotify, sinks that already
// got a notification of it are not sent it again; with renotify every subscribed sink is sent
// it once more, under NotificationID(provider, event_id+":replay:"+n, sink, type). actor says
// who asked (the admin token's name, or cli:<user>). Errors wrap domain.ErrNotFound or
// store.ErrNotNormalized (with ErrCannotReplay), or start.ErrUnavailable.
func (s *Service) Replay(ctx context.Context, provider, eventID string, renotify bool, actor string) (ReplayResult, error) {
	rec, err := s.Replays.RecordedEvent(ctx, provider, eventID)
	if errors.Is(err, domain.ErrNotFound) {
		return ReplayResult{}, fmt.Errorf("%w: event %s:%s: %w", ErrCannotReplay, provider, eventID, domain.ErrNotFound)
	}
	if err != nil {
		return ReplayResult{}, fmt.Errorf("replay: %w", err)
	}
	if rec.Event == nil {
		return ReplayResult{}, fmt.Errorf("%w: event %s:%s: %w", ErrCannotReplay, provider, eventID, rec.Missing)
	}
	// A reserved number whose workflow ID turns out to be taken (an earlier attempt that
	// started it but lost its answer) is kept, as that replay did run; the next one is tried.
	for range 5 {
		n, err := s.Replays.ReserveReplay(ctx, provider, eventID, replayPrefix(provider, eventID), renotify, actor)
		if err != nil {
			return ReplayResult{}, fmt.Errorf("replay: %w", err)
		}
		id := ReplayWorkflowID(provider, eventID, n)
		runID, st, err := s.Starter.StartReplay(ctx, *rec.Event, id, n, renotify)
		if err == nil && st == start.Started {
			s.Log.Info("replay started", "actor", actor, "provider", provider, "event_id", eventID,
				"replay", n, "renotify", renotify, "workflow_id", id)
			return ReplayResult{Provider: provider, EventID: eventID, Replay: n, WorkflowID: id,
				RunID: runID, Renotify: renotify}, nil
		}
		if err == nil { // AlreadyStarted
			continue
		}
		// Not started: give the number back so n keeps counting replays that ran.
		delCtx, cancelDel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if derr := s.Replays.DeleteReplay(delCtx, provider, eventID, n); derr != nil {
			s.Log.Warn("replay: could not release the replay number", "replay", n, "error", derr)
		}
		cancelDel()
		return ReplayResult{}, fmt.Errorf("start replay: %w", err)
	}
	return ReplayResult{}, fmt.Errorf("%w: replay %s:%s: five replay numbers in a row were taken", start.ErrUnavailable, provider, eventID)
}

// Wait waits up to timeout for a started replay to finish and fills its Result. It reports
// false (and no error) when the run is still open at the timeout, e.g. a Notify retrying.
func (s *Service) Wait(ctx context.Context, r *ReplayResult, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var res domain.Result
	err := s.Temporal.GetWorkflow(ctx, r.WorkflowID, r.RunID).Get(ctx, &res)
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		return false, fmt.Errorf("replay %s: %w", r.WorkflowID, err)
	}
	r.Result = &res
	return true, nil
}
