// Package backfill fetches back, from a provider's own API, the events whose webhooks never
// arrived (providers stop retrying after hours; a lost bounce is never known otherwise), and
// takes them in the way a webhook comes in: each listed item becomes the body that provider's
// webhook of that event would carry, the endpoint's adapter parses it into the same event id,
// and acceptance inserts it under (provider, event_id). An event mailhook has already is a
// duplicate; a new one is accepted and processed like any webhook's, with Source "backfill".
//
// A run lists one window [Since, Until) page by page (Mailgun's Events API, Postmark's Bounce
// API), at most Settings.Rate requests a second, and saves its position after each page is
// accepted (ProgressStore), so a run stopped at any point resumes at the page after the last one
// saved. Run is what `mailhook backfill` calls and what an activity can call, its OnPage
// heartbeating.
//
// It reaches neither the HTTP edge nor PostgreSQL itself: the process hands it an Acceptor (the
// webhook's, internal/acceptance) and a ProgressStore (internal/store), through the small
// interfaces below.
package backfill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/providercounts"
)

// Supported names the providers whose events can be listed back.
var Supported = providercounts.Listable

// Page is one page of a provider's listing: the webhook bodies of its items and the cursor of
// the page after it. Last says there is none (Next is then empty).
type Page struct {
	Bodies [][]byte
	Next   string
	Last   bool
}

// Lister lists a window's events a page at a time; cursor "" is the first page, any other a
// Page.Next it returned (possibly in an earlier process: cursors are saved).
type Lister interface {
	Page(ctx context.Context, cursor string) (Page, error)
}

// Parser parses a webhook body into events: the endpoint's provider.Adapter (its Parse is the
// webhook's, after verification).
type Parser interface {
	Parse(r provider.Request) ([]domain.Event, error)
}

// Acceptor makes events durable under their dedupe key and answers for each, in order: the
// webhook's acceptance (acceptance.Acceptor, as the process wires it).
type Acceptor interface {
	Accept(ctx context.Context, evs []domain.Event) ([]Verdict, error)
}

// Status is what acceptance made of one event.
type Status string

const (
	// Accepted: stored now; its workflow is started next.
	Accepted Status = "accepted"
	// Duplicate: stored before (by its webhook, or an earlier run); nothing more happens.
	Duplicate Status = "duplicate"
	// Rejected: it can never be stored as it is (Verdict.Err says why).
	Rejected Status = "rejected"
)

// Verdict is one event's answer.
type Verdict struct {
	Status Status
	// Err, when Rejected, is why; its innermost cause is safe to log.
	Err error
}

// ProgressStore keeps a window's checkpoint (the store's backfill_progress, as the process
// wires it).
type ProgressStore interface {
	// LoadBackfill returns the window's checkpoint, and false when none was saved.
	LoadBackfill(ctx context.Context, k Key) (Checkpoint, bool, error)
	SaveBackfill(ctx context.Context, k Key, c Checkpoint) error
}

// Key names one backfill: an endpoint's provider listing over the window [Since, Until).
type Key struct {
	Endpoint string
	Provider string
	Since    time.Time
	Until    time.Time
}

// Checkpoint is where a window's listing is. Cursor is the position of the next page to fetch,
// in the provider's terms ("" before the first page); the counts are over every run of the
// window. UpdatedAt is the store's, when it was saved.
type Checkpoint struct {
	Cursor     string
	Pages      int64
	Fetched    int64
	Accepted   int64
	Duplicates int64
	Rejected   int64
	Finished   bool
	UpdatedAt  time.Time
}

// Job is one backfill: an endpoint's events over [Since, Until).
type Job struct {
	// Endpoint is the config's endpoint name (part of the progress key); Provider its provider.
	Endpoint string
	Provider string
	// Namespace, when set, replaces the events' Provider, as the webhook handler does
	// (provider.EventNamespace).
	Namespace string
	// Settings is the endpoint's reconcile block: the API's address, credentials and Rate.
	Settings     providercounts.Settings
	Since, Until time.Time
	// Restart lists a window again from its first page even when a run finished it.
	Restart bool

	Parser   Parser
	Acceptor Acceptor
	Progress ProgressStore
	// Lister, when set, replaces the provider's (tests); HTTPClient, when set, is the one the
	// provider's lister uses (default: Settings.Timeout per request, 30 s when unset).
	Lister     Lister
	HTTPClient *http.Client
	Log        *slog.Logger
	// OnPage, when set, is called after each page is saved, with the totals so far: an
	// activity records a heartbeat there.
	OnPage func(Progress)
	// Now is the clock (default time.Now): the window must end in the past.
	Now func() time.Time
}

// Progress is a window's totals, over every run of it.
type Progress struct {
	Pages      int64 `json:"pages"`
	Fetched    int64 `json:"fetched"`
	Accepted   int64 `json:"accepted"`
	Duplicates int64 `json:"duplicates"`
	// Rejected counts items no webhook of them could be stored either (unparsable, or refused
	// by acceptance): each is logged with its reason.
	Rejected int64 `json:"rejected"`
	Finished bool  `json:"finished"`
	// Resumed says this run started from a saved position (or found the window finished).
	Resumed bool `json:"resumed"`
}

// Validate checks the job before anything is fetched; errors name fields, never values.
func (j Job) Validate() error {
	switch {
	case j.Endpoint == "":
		return errors.New("backfill: no endpoint")
	case !supported(j.Provider):
		return fmt.Errorf("backfill: provider %q has no events API mailhook lists (supported: mailgun, postmark)", j.Provider)
	case j.Since.IsZero() || j.Until.IsZero() || !j.Since.Before(j.Until):
		return errors.New("backfill: the window is empty: --since must be before --until")
	case j.Parser == nil || j.Acceptor == nil || j.Progress == nil:
		return errors.New("backfill: the job needs a parser, an acceptor and a progress store")
	}
	if j.Until.After(j.now()) {
		return fmt.Errorf("backfill: --until %s is in the future", j.Until.UTC().Format(time.RFC3339))
	}
	if j.Lister == nil {
		return j.Settings.Validate(j.Provider)
	}
	return nil
}

func supported(p string) bool {
	for _, s := range Supported {
		if s == p {
			return true
		}
	}
	return false
}

func (j Job) now() time.Time {
	if j.Now != nil {
		return j.Now()
	}
	return time.Now()
}

// NewLister builds the provider's lister for the job's window.
func NewLister(j Job) (Lister, error) {
	if err := j.Settings.Validate(j.Provider); err != nil {
		return nil, fmt.Errorf("backfill: %w", err)
	}
	hc := j.HTTPClient
	if hc == nil {
		hc = j.Settings.HTTPClient()
	}
	r, base := j.Settings.RequestRate(), j.Settings.URL
	switch j.Provider {
	case "mailgun":
		return newMailgun(base(providercounts.MailgunAPI), j.Settings.APIKey, j.Settings.Domain, j.Since, j.Until, hc, r)
	case "postmark":
		return newPostmark(base(providercounts.PostmarkAPI), j.Settings.ServerToken, j.Settings.MessageStream, j.Since, j.Until, hc, r)
	}
	return nil, fmt.Errorf("backfill: provider %q has no events API mailhook lists", j.Provider)
}

// Run lists the job's window from where it stopped (or from its start), accepts each page's
// events and saves the position after each page. It returns the totals, also on error: a run
// that fails is resumed by running the same job again.
func Run(ctx context.Context, j Job) (Progress, error) {
	if err := j.Validate(); err != nil {
		return Progress{}, err
	}
	log := j.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("endpoint", j.Endpoint, "provider", j.Provider,
		"since", j.Since.UTC().Format(time.RFC3339), "until", j.Until.UTC().Format(time.RFC3339))
	lister := j.Lister
	if lister == nil {
		var err error
		if lister, err = NewLister(j); err != nil {
			return Progress{}, err
		}
	}
	key := Key{Endpoint: j.Endpoint, Provider: j.Provider, Since: j.Since.UTC(), Until: j.Until.UTC()}
	saved, found, err := j.Progress.LoadBackfill(ctx, key)
	if err != nil {
		return Progress{}, fmt.Errorf("backfill: %w", err)
	}
	if found && j.Restart {
		saved = Checkpoint{}
		found = false
	}
	p := progressOf(saved, found)
	if saved.Finished {
		log.InfoContext(ctx, "backfill window already finished; nothing fetched (--restart lists it again)", progressAttrs(p)...)
		return p, nil
	}
	if found {
		log.InfoContext(ctx, "backfill resuming after the last saved page", progressAttrs(p)...)
	} else {
		log.InfoContext(ctx, "backfill starting")
	}
	cursor := saved.Cursor
	for {
		page, err := lister.Page(ctx, cursor)
		if err != nil {
			return p, fmt.Errorf("backfill %s page %d: %w", j.Endpoint, p.Pages+1, err)
		}
		counts, err := j.accept(ctx, log, page.Bodies)
		if err != nil {
			return p, fmt.Errorf("backfill %s page %d: %w", j.Endpoint, p.Pages+1, err)
		}
		next := p
		next.Pages++
		next.Fetched += int64(len(page.Bodies))
		next.Accepted += counts.Accepted
		next.Duplicates += counts.Duplicates
		next.Rejected += counts.Rejected
		next.Finished = page.Last
		if !page.Last {
			cursor = page.Next
		} else {
			cursor = ""
		}
		if err := j.Progress.SaveBackfill(ctx, key, Checkpoint{Cursor: cursor, Pages: next.Pages, Fetched: next.Fetched,
			Accepted: next.Accepted, Duplicates: next.Duplicates, Rejected: next.Rejected, Finished: next.Finished}); err != nil {
			// The page is accepted but its position not saved: a resumed run fetches it again,
			// and its events are duplicates then.
			return p, fmt.Errorf("backfill: %w", err)
		}
		p = next
		log.InfoContext(ctx, "backfill page", append(progressAttrs(p), "page_items", len(page.Bodies),
			"page_accepted", counts.Accepted, "page_duplicates", counts.Duplicates)...)
		if j.OnPage != nil {
			j.OnPage(p)
		}
		if page.Last {
			log.InfoContext(ctx, "backfill finished", progressAttrs(p)...)
			return p, nil
		}
		if page.Next == "" {
			return p, fmt.Errorf("backfill %s page %d: the lister gave no next page", j.Endpoint, p.Pages)
		}
	}
}

func progressOf(s Checkpoint, found bool) Progress {
	return Progress{Pages: s.Pages, Fetched: s.Fetched, Accepted: s.Accepted, Duplicates: s.Duplicates,
		Rejected: s.Rejected, Finished: s.Finished, Resumed: found}
}

func progressAttrs(p Progress) []any {
	return []any{"pages", p.Pages, "fetched", p.Fetched, "accepted", p.Accepted, "duplicates", p.Duplicates,
		"rejected", p.Rejected, "finished", p.Finished}
}

// pageCounts is what became of one page's items.
type pageCounts struct{ Accepted, Duplicates, Rejected int64 }

// accept parses each body as the endpoint's webhook and accepts the page's events with one call,
// as one webhook request's are. An item that does not parse is rejected alone (a webhook of it
// would have been refused too), with the parser's reason, which names fields, never values.
func (j Job) accept(ctx context.Context, log *slog.Logger, bodies [][]byte) (pageCounts, error) {
	var c pageCounts
	evs := make([]domain.Event, 0, len(bodies))
	now := j.now()
	for i, b := range bodies {
		parsed, err := j.Parser.Parse(provider.Request{Ctx: ctx, Body: b, Now: now})
		if err == nil && len(parsed) == 0 {
			err = errors.New("no events in body")
		}
		if err != nil {
			c.Rejected++
			log.WarnContext(ctx, "backfill item rejected: it does not parse as a webhook", "index", i, "reason", innermost(err))
			continue
		}
		for _, ev := range parsed {
			if j.Namespace != "" {
				ev.Provider = j.Namespace
			}
			ev.Source = domain.SourceBackfill
			evs = append(evs, ev)
		}
	}
	if len(evs) == 0 {
		return c, nil
	}
	verdicts, err := j.Acceptor.Accept(ctx, evs)
	if err != nil {
		return c, err
	}
	for i, v := range verdicts {
		switch v.Status {
		case Accepted:
			c.Accepted++
		case Duplicate:
			c.Duplicates++
		default:
			c.Rejected++
			log.WarnContext(ctx, "backfill event rejected: it cannot be stored", "event_id", evs[i].EventID, "reason", innermost(v.Err))
		}
	}
	return c, nil
}

// innermost is an error's innermost cause: the short reason the provider packages and
// acceptance put last, free of request data.
func innermost(err error) string {
	if err == nil {
		return ""
	}
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			if es := u.Unwrap(); len(es) > 0 {
				next = es[len(es)-1]
			}
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		}
		if next == nil {
			return err.Error()
		}
		err = next
	}
}
