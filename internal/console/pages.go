package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/mailaddr"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/rejected"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/suppression"
)

// overviewWindow is how far back the overview counts per minute.
const overviewWindow = 10 * time.Minute

// minuteRow is one minute of the overview. A mark says what a count is when the count read
// store.MaxCounted rows: "≥" a partial minute, "—" one not counted.
type minuteRow struct {
	Minute             time.Time
	Accepted, Rejected int64
	AccMark, RejMark   string
}

type overviewData struct {
	Minutes                         []minuteRow
	AcceptedTotal, RejectedTotal    int64
	AcceptedCapped, RejectedCapped  bool
	MaxCounted                      int
	Backlog                         int64
	BacklogCapped                   bool
	Lag                             time.Duration
	Sinks                           []httpapi.SinkView
	Quarantined                     int64
	ProviderChecks                  []providercounts.Check
	ShowSinks, ShowReports, ShowLag bool
}

// fill puts counts (the latest minute first) into rows; capped, the earliest counted minute
// is partial and the ones before it were not counted.
func fill(rows []minuteRow, counts []store.MinuteCount, capped bool, set func(*minuteRow, int64, string)) int64 {
	var total int64
	byMinute := map[time.Time]int64{}
	earliest := time.Time{}
	for _, c := range counts {
		m := c.Minute.UTC()
		byMinute[m] = c.Count
		total += c.Count
		if earliest.IsZero() || m.Before(earliest) {
			earliest = m
		}
	}
	for i := range rows {
		m := rows[i].Minute
		switch {
		case capped && m.Before(earliest):
			set(&rows[i], 0, "—")
		case capped && m.Equal(earliest):
			set(&rows[i], byMinute[m], "≥ ")
		default:
			set(&rows[i], byMinute[m], "")
		}
	}
	return total
}

func (c *Console) overview(r *http.Request, s session) (any, error) {
	ctx := r.Context()
	now := c.now().UTC()
	since := now.Truncate(time.Minute).Add(-overviewWindow + time.Minute)
	d := overviewData{ShowSinks: domain.Grants(s.Scopes, domain.ScopeSinksRead), ShowReports: domain.Grants(s.Scopes, domain.ScopeReportsRead),
		MaxCounted: store.MaxCounted}
	if d.ShowReports {
		acc, accCapped, err := c.reads.AcceptedPerMinute(ctx, since)
		if err != nil {
			return nil, err
		}
		rej, rejCapped, err := c.reads.RejectedPerMinute(ctx, since)
		if err != nil {
			return nil, err
		}
		for m := now.Truncate(time.Minute); !m.Before(since); m = m.Add(-time.Minute) {
			d.Minutes = append(d.Minutes, minuteRow{Minute: m}) // the latest first
		}
		d.AcceptedTotal = fill(d.Minutes, acc, accCapped, func(r *minuteRow, n int64, mark string) { r.Accepted, r.AccMark = n, mark })
		d.RejectedTotal = fill(d.Minutes, rej, rejCapped, func(r *minuteRow, n int64, mark string) { r.Rejected, r.RejMark = n, mark })
		d.AcceptedCapped, d.RejectedCapped = accCapped, rejCapped
		n, capped, oldest, err := c.reads.Unprocessed(ctx)
		if err != nil {
			return nil, err
		}
		d.Backlog, d.BacklogCapped, d.ShowLag = n, capped, true
		if !oldest.IsZero() {
			d.Lag = now.Sub(oldest).Round(time.Second)
		}
		if d.Quarantined, err = c.reads.QuarantineCount(ctx); err != nil {
			return nil, err
		}
		if d.ProviderChecks, err = c.reads.LatestProviderCounts(ctx); err != nil {
			return nil, err
		}
	}
	if d.ShowSinks && c.api.SinkStates != nil {
		var err error
		if d.Sinks, err = c.api.SinkViews(ctx); err != nil {
			return nil, err
		}
	}
	return d, nil
}

type messagesData struct {
	Providers    []string
	Provider, ID string
	Found        bool
	NotFound     bool
	Message      store.Message
	// Timeline is the message's timeline (nil without the explorer).
	Timeline *shownTimeline
	// A recipient search: the address as typed, and the messages to it (newest first).
	Recipient   string
	Searched    bool
	ByRecipient []recipientMessage
	More        bool
}

// messages looks a message up by provider and the provider's message id, and shows what GET
// /v1/messages/{provider}/{id} shows: the only page with the recipient whole.
func (c *Console) messages(r *http.Request, _ session) (any, error) {
	d := messagesData{Providers: c.providers(), Provider: r.URL.Query().Get("provider"), ID: strings.TrimSpace(r.URL.Query().Get("id")),
		Recipient: strings.TrimSpace(r.URL.Query().Get("recipient"))}
	if d.Provider == "" && len(d.Providers) > 0 {
		d.Provider = d.Providers[0]
	}
	if d.ID == "" && d.Recipient != "" && c.api.Explorer != nil {
		var err error
		d.Searched = true
		d.ByRecipient, d.More, err = c.recipientMessages(r, d.Recipient)
		return d, err
	}
	if d.ID == "" {
		return d, nil
	}
	get := c.api.Messages.GetMessage
	if c.reads.MessageState != nil && c.api.Explorer != nil {
		get = c.reads.MessageState // the paged timeline shows its events, not the whole history
	}
	m, err := get(r.Context(), d.Provider, d.ID)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		d.NotFound = true
		return d, nil
	case err != nil:
		return d, err
	}
	d.Found, d.Message = true, m
	if c.api.Explorer != nil {
		if d.Timeline, err = c.timelineOf(r, d.Provider, d.ID); err != nil {
			return d, err
		}
	}
	return d, nil
}

// providers are the providers the configured endpoints receive under, sorted.
func (c *Console) providers() []string {
	set := map[string]bool{}
	for _, ep := range c.api.Endpoints {
		p := ep.Provider
		if ep.Namespace != "" {
			p = ep.Namespace
		}
		set[p] = true
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func (c *Console) endpoints() []string {
	out := make([]string, 0, len(c.api.Endpoints))
	for name := range c.api.Endpoints {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

type rejectedData struct {
	Endpoints, Causes []string
	Endpoint, Cause   string
	Rows              []store.RejectedRequest
	Drops             []store.RejectedDrop
	Next              string
	ByCause           []causeCount
}

type causeCount struct {
	Endpoint, Cause string
	N               int
}

// rejected lists the kept refused requests, newest first, filtered by endpoint and cause
// (GET /v1/rejections).
func (c *Console) rejected(r *http.Request, _ session) (any, error) {
	q := r.URL.Query()
	d := rejectedData{Endpoints: c.endpoints(), Endpoint: q.Get("endpoint"), Cause: q.Get("cause")}
	for _, k := range rejected.Causes {
		d.Causes = append(d.Causes, string(k))
	}
	if c.api.RejectedList == nil {
		return d, nil
	}
	if d.Cause != "" && !slices.Contains(d.Causes, d.Cause) {
		return d, userError("unknown cause")
	}
	rows, next, err := c.api.RejectedList.ListRejected(r.Context(), store.RejectedFilter{Endpoint: d.Endpoint, Cause: d.Cause, After: q.Get("after"), Limit: 100})
	if errors.Is(err, store.ErrBadCursor) {
		return d, userError("after is not a page of this list")
	}
	if err != nil {
		return d, err
	}
	d.Rows, d.Next = rows, next
	counts := map[[2]string]int{}
	for _, row := range rows {
		counts[[2]string{row.Endpoint, row.Cause}]++
	}
	for k, n := range counts {
		d.ByCause = append(d.ByCause, causeCount{Endpoint: k[0], Cause: k[1], N: n})
	}
	sort.Slice(d.ByCause, func(i, j int) bool {
		if d.ByCause[i].N != d.ByCause[j].N {
			return d.ByCause[i].N > d.ByCause[j].N
		}
		return d.ByCause[i].Endpoint+d.ByCause[i].Cause < d.ByCause[j].Endpoint+d.ByCause[j].Cause
	})
	if d.Drops, err = c.api.RejectedList.RejectedDrops(r.Context(), d.Endpoint); err != nil {
		return d, err
	}
	return d, nil
}

func (c *Console) retryRejected(r *http.Request, s session) (string, any, error) {
	id, err := strconv.ParseInt(r.PostForm.Get("id"), 10, 64)
	if err != nil || id < 1 {
		return "", nil, userError("id must be a positive integer")
	}
	var answer map[string]any
	err = c.audit(r, s, store.AuditRejectionRetry, func(ctx context.Context) (err error) {
		answer, err = c.api.RetryRejected(ctx, id, s.Actor)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	return "Request " + strconv.FormatInt(id, 10) + " retried: " + toString(answer["status"]), nil, nil
}

func toString(v any) string { return fmt.Sprint(v) }

type quarantineData struct {
	Events []store.QuarantinedEvent
	Next   string
	Result *domain.RedriveResult
}

// quarantine lists the quarantined events, longest quarantined first (GET /v1/quarantine).
func (c *Console) quarantine(r *http.Request, _ session) (any, error) {
	list, next, err := c.api.Quarantine.ListQuarantine(r.Context(), store.QuarantineFilter{After: r.URL.Query().Get("after"), Limit: 100})
	if errors.Is(err, store.ErrBadCursor) {
		return quarantineData{}, userError("after is not a page of this list")
	}
	return quarantineData{Events: list, Next: next}, err
}

func (c *Console) redriveQuarantined(r *http.Request, s session) (string, any, error) {
	var res domain.RedriveResult
	err := c.audit(r, s, store.AuditRedrive, func(ctx context.Context) (err error) {
		res, err = c.api.Redrive(ctx, httpapi.RedriveRequest{Quarantined: true}, s.Actor)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	d, verr := c.quarantine(r, s)
	qd, _ := d.(quarantineData)
	qd.Result = &res
	return redriveNotice(res), qd, verr
}

func redriveNotice(res domain.RedriveResult) string {
	return "Redrive: " + strconv.Itoa(res.Considered) + " considered, " + strconv.Itoa(res.Started) + " started, " +
		strconv.Itoa(res.Running) + " running already, " + strconv.Itoa(res.Skipped) + " skipped, " + strconv.Itoa(res.Failed) + " failed"
}

// maxParkedByType is the most parked notifications the sinks page counts by type (about 40 ms):
// past it the count reads too many rows for a page (GET /v1/sinks/{name}/notifications pages through them).
const maxParkedByType = 20_000

type sinkRow struct {
	httpapi.SinkView
	ParkedByType map[string]int64
}

type redeliverForm struct {
	Sink, Status, Type, Provider string
}

type sinksData struct {
	Sinks     []sinkRow
	Types     []string
	Statuses  []string
	Providers []string
	// DryRun is the count a redelivery's dry run found, with its filter, to confirm.
	DryRun     *store.Redelivery
	DryRunForm redeliverForm
	Done       *store.Redelivery
}

// sinks shows each sink's state and its parked notifications by type (GET /v1/sinks).
func (c *Console) sinks(r *http.Request, _ session) (any, error) {
	d := sinksData{Types: domain.NotificationTypes, Statuses: httpapi.RedeliverStatuses(), Providers: c.providers()}
	if c.api.SinkStates == nil {
		return d, nil
	}
	views, err := c.api.SinkViews(r.Context())
	if err != nil {
		return d, err
	}
	for _, v := range views {
		row := sinkRow{SinkView: v}
		if v.Parked > 0 && v.Parked <= maxParkedByType {
			if row.ParkedByType, err = c.reads.ParkedByType(r.Context(), v.Name); err != nil {
				return d, err
			}
		}
		d.Sinks = append(d.Sinks, row)
	}
	return d, nil
}

func (c *Console) pauseSink(r *http.Request, s session) (string, any, error) {
	return c.setPaused(r, s, true)
}

func (c *Console) resumeSink(r *http.Request, s session) (string, any, error) {
	return c.setPaused(r, s, false)
}

func (c *Console) setPaused(r *http.Request, s session, paused bool) (string, any, error) {
	action := store.AuditSinkResume
	if paused {
		action = store.AuditSinkPause
	}
	var v httpapi.SinkView
	err := c.audit(r, s, action, func(ctx context.Context) (err error) {
		v, err = c.api.PauseSink(ctx, r.PostForm.Get("sink"), paused, s.Actor)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	if paused {
		return "Sink " + v.Name + " paused: its notifications park until it is resumed", nil, nil
	}
	return "Sink " + v.Name + " resumed: what it parked drains at its pace", nil, nil
}

// redeliver runs a redelivery: with dry_run it only counts, and the page shows the count with
// the button for the real one (the same filter); without, the notifications are parked again
// under their ids for the drainer.
func (c *Console) redeliver(r *http.Request, s session) (string, any, error) {
	f := redeliverForm{Sink: r.PostForm.Get("sink"), Status: r.PostForm.Get("status"), Type: r.PostForm.Get("type"), Provider: r.PostForm.Get("provider")}
	req := httpapi.RedeliverRequest{Provider: f.Provider, Type: f.Type, DryRun: r.PostForm.Get("dry_run") == "true"}
	if f.Status != "" {
		req.Status = []string{f.Status}
	}
	var res store.Redelivery
	var statuses []string
	err := c.audit(r, s, store.AuditSinkRedeliver, func(ctx context.Context) (err error) {
		res, statuses, err = c.api.Redeliver(ctx, f.Sink, req, s.Actor)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	dv, verr := c.sinks(r, s)
	d, _ := dv.(sinksData)
	if req.DryRun {
		d.DryRun, d.DryRunForm = &res, f
		return "Dry run: " + strconv.FormatInt(res.Matched, 10) + " notifications of sink " + f.Sink + " (" + strings.Join(statuses, ", ") +
			") would be redelivered; nothing was changed", d, verr
	}
	d.Done = &res
	return "Redelivery: " + strconv.FormatInt(res.Requeued, 10) + " notifications of sink " + f.Sink + " parked again under their ids for the drainer (" +
		strconv.FormatInt(res.AlreadyParked, 10) + " were parked already, " + strconv.FormatInt(res.Unavailable, 10) + " no longer have a body)", d, verr
}

type suppressionsData struct {
	Scopes  []string
	Reasons []string
	// The check of an address typed by the operator (kept for the lift form).
	Address string
	Scope   string
	Check   *store.SuppressionCheck
	Rows    []store.Suppression // the address's rows (suppressions:read)
	// The list, by scope and reason, addresses masked.
	ListScope, ListReason string
	List                  []store.Suppression
	More                  bool
}

const suppressionListLimit = 100

// suppressions checks an address (GET /v1/suppressions/check and /{address}) and lists
// suppressions by scope (GET /v1/suppressions), the addresses masked: a lift starts from a check,
// where the operator typed the address.
func (c *Console) suppressions(r *http.Request, s session) (any, error) {
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q = r.PostForm
	}
	d := suppressionsData{Reasons: domain.SuppressionReasons, Address: strings.TrimSpace(q.Get("address")), Scope: q.Get("scope"),
		ListScope: r.URL.Query().Get("list_scope"), ListReason: r.URL.Query().Get("reason")}
	d.Scopes = []string{suppression.GlobalScope}
	if d.Scope == "" {
		d.Scope = suppression.GlobalScope
	}
	ctx := r.Context()
	if d.Address != "" {
		if !domain.ValidScope(d.Scope) {
			return d, userError("scope: not a scope name")
		}
		chk, err := c.api.Suppressions.CheckSuppression(ctx, mailaddr.Key(d.Address), d.Scope)
		if err != nil {
			return d, err
		}
		d.Check = &chk
		if domain.Grants(s.Scopes, domain.ScopeSuppressionsRead) {
			rows, err := c.api.Suppressions.AddressSuppressions(ctx, d.Address)
			if err != nil && !errors.Is(err, domain.ErrNotFound) {
				return d, err
			}
			d.Rows = rows
		}
	}
	if domain.Grants(s.Scopes, domain.ScopeSuppressionsRead) {
		if d.ListScope != "" && !domain.ValidScope(d.ListScope) {
			return d, userError("scope: not a scope name")
		}
		if d.ListReason != "" && !suppression.KnownReason(d.ListReason) {
			return d, userError("unknown reason")
		}
		list, err := c.api.Suppressions.ListSuppressions(ctx, store.SuppressionFilter{Scope: d.ListScope, Reason: d.ListReason, Limit: suppressionListLimit + 1})
		if err != nil {
			return d, err
		}
		if len(list) > suppressionListLimit {
			list, d.More = list[:suppressionListLimit], true
		}
		d.List = list
	}
	return d, nil
}

// liftSuppression lifts the checked address's suppression in one scope, with the operator's
// reason (DELETE /v1/suppressions/{address}); the reason is stored, never logged.
func (c *Console) liftSuppression(r *http.Request, s session) (string, any, error) {
	var lift store.SuppressionLift
	err := c.audit(r, s, store.AuditSuppressionLift, func(ctx context.Context) (err error) {
		lift, err = c.api.LiftSuppression(ctx, r.PostForm.Get("address"), r.PostForm.Get("scope"), r.PostForm.Get("reason"), s.Actor)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	d, verr := c.suppressions(r, s)
	return "Suppression lifted in scope " + lift.Scope + " (it was " + lift.Reason + ")", d, verr
}

type reconciliationData struct {
	Date, Provider string
	Providers      []string
	Report         reconcile.Report
	// Live: counted from the events now (at Counted); otherwise the daily reconciliation's
	// stored counts, computed at Counted (zero: that day was not counted yet).
	Live    bool
	Counted time.Time
}

// reconciliation shows a day's report, by default the day before (the one the daily
// reconciliation counts at 00:30 UTC): our counts per type and beside them the provider's own
// where a reconcile block compares them, with the gaps. It shows what the daily reconciliation
// stored (daily_counts, provider_counts: a few rows, whatever the day's traffic) and says when
// that was computed; counting a day live reads every event of it (seconds per million), so
// only the operator's "Count now" does (live=1), as GET /v1/reports/daily does.
func (c *Console) reconciliation(r *http.Request, _ session) (any, error) {
	q := r.URL.Query()
	d := reconciliationData{Provider: q.Get("provider"), Providers: c.providers(), Live: q.Get("live") != ""}
	day, err := reconcile.ParseDate(strings.TrimSpace(q.Get("date")), c.now())
	if err != nil {
		return d, userError(err.Error())
	}
	d.Date = day.Format(domain.DateLayout)
	if c.reads.StoredDailyCounts == nil {
		d.Live = true
	}
	if d.Live {
		if c.api.Reconciler == nil {
			return d, nil
		}
		d.Counted = c.now()
		d.Report, err = c.api.Reconciler.DailyReport(r.Context(), d.Date, d.Provider)
		return d, err
	}
	d.Report, err = reconcile.BuildReport(r.Context(), storedReport{reads: c.reads, counted: &d.Counted}, d.Date, d.Provider, c.now())
	return d, err
}

// storedReport is the report's source over what the daily reconciliation stored. The page
// shows no bounce categories, so it reads none.
type storedReport struct {
	reads   Reads
	counted *time.Time
}

func (s storedReport) DailyCounts(ctx context.Context, day time.Time, provider string) ([]domain.DailyCount, error) {
	counts, at, err := s.reads.StoredDailyCounts(ctx, day, provider)
	*s.counted = at
	return counts, err
}

func (storedReport) DailyBounceCategories(context.Context, time.Time, string) ([]store.BounceCategoryCount, error) {
	return nil, nil
}

func (s storedReport) ProviderCounts(ctx context.Context, day time.Time, provider string) ([]providercounts.Check, error) {
	if s.reads.ProviderCounts == nil {
		return nil, nil
	}
	return s.reads.ProviderCounts(ctx, day, provider)
}

func (c *Console) redriveStuck(r *http.Request, s session) (string, any, error) {
	var res domain.RedriveResult
	err := c.audit(r, s, store.AuditRedrive, func(ctx context.Context) (err error) {
		res, err = c.api.Redrive(ctx, httpapi.RedriveRequest{OlderThan: r.PostForm.Get("older_than")}, s.Actor)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	return redriveNotice(res), nil, nil
}

type erasuresData struct {
	Jobs []domain.ErasureJob
}

// erasures lists the latest erasure jobs with their progress (GET /v1/erasures/jobs/{id} for
// each): the address only as its keyed hash.
func (c *Console) erasures(r *http.Request, _ session) (any, error) {
	jobs, err := c.reads.ErasureJobs(r.Context(), 50)
	return erasuresData{Jobs: jobs}, err
}
