package console

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/store"
)

// The explorer's pages: Events (GET /v1/events), Audit (GET /v1/audit) and the message's
// timeline on the Messages page (GET /v1/messages/{p}/{id}/timeline). Each reads the same store
// functions as its API route, keyset-paged, and no list shows an address whole.

// consolePageSize is a page of the Events and Audit lists.
const consolePageSize = 50

// formTime reads a time filter as the API takes it (RFC 3339) or as a browser's
// datetime-local input sends it (UTC, to the minute); zero when empty.
func formTime(q url.Values, name string) (time.Time, error) {
	v := strings.TrimSpace(q.Get(name))
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, userError(name + ": a time such as 2026-12-01T08:00 (UTC) or 2026-12-01T08:00:00Z")
}

// formBool reads a yes/no filter; nil for any.
func formBool(q url.Values, name string) (*bool, error) {
	switch q.Get(name) {
	case "":
		return nil, nil
	case "yes", "true":
		b := true
		return &b, nil
	case "no", "false":
		b := false
		return &b, nil
	}
	return nil, userError(name + ": yes, no or empty")
}

// nextURL is path with the query q and after set to next: the list's next page, filters kept.
func nextURL(path string, q url.Values, next string) string { return pageURL(path, q, "after", next) }

// pageURL is path with the query q, its cursors (after, before) replaced by name=cursor: another
// page of the list, filters kept; "" without a cursor.
func pageURL(path string, q url.Values, name, cursor string) string {
	if cursor == "" {
		return ""
	}
	n := url.Values{}
	for k, v := range q {
		if k != "after" && k != "before" && len(v) > 0 && v[0] != "" {
			n.Set(k, v[0])
		}
	}
	n.Set(name, cursor)
	return path + "?" + n.Encode()
}

type eventsData struct {
	Providers, Endpoints, Outcomes []string
	// Q are the filters as the operator typed them (the recipient too: it is the operator's own).
	Q      map[string]string
	Events []store.ExplorerEvent
	Next   string
	First  bool
}

// events lists events newest first under the explorer's filters (GET /v1/events).
func (c *Console) events(r *http.Request, _ session) (any, error) {
	q := r.URL.Query()
	d := eventsData{Providers: c.providers(), Endpoints: c.endpoints(), Outcomes: httpapi.ExplorerOutcomes(), Q: map[string]string{}, First: q.Get("after") == ""}
	for _, k := range []string{"provider", "endpoint", "type", "outcome", "recipient", "message_id", "since", "until", "quarantined", "through_temporal"} {
		d.Q[k] = strings.TrimSpace(q.Get(k))
	}
	if c.api.Explorer == nil {
		return d, nil
	}
	f := store.EventFilter{Type: d.Q["type"], Outcome: d.Q["outcome"], MessageID: d.Q["message_id"], Recipient: d.Q["recipient"],
		After: q.Get("after"), Limit: consolePageSize}
	if p := d.Q["provider"]; p != "" {
		f.Providers = []string{p}
	}
	if name := d.Q["endpoint"]; name != "" {
		ep, ok := c.api.Endpoints[name]
		if !ok {
			return d, userError("unknown endpoint")
		}
		key := cmp.Or(ep.Namespace, ep.Provider)
		if len(f.Providers) > 0 && f.Providers[0] != key {
			return d, nil // no event is under two providers
		}
		f.Providers = []string{key}
	}
	if f.Outcome != "" && !slices.Contains(d.Outcomes, f.Outcome) {
		return d, userError("unknown outcome")
	}
	var err error
	if f.Since, err = formTime(q, "since"); err != nil {
		return d, err
	}
	if f.Until, err = formTime(q, "until"); err != nil {
		return d, err
	}
	if f.Quarantined, err = formBool(q, "quarantined"); err != nil {
		return d, err
	}
	if f.ThroughTemporal, err = formBool(q, "through_temporal"); err != nil {
		return d, err
	}
	list, next, err := c.api.Explorer.ListEvents(r.Context(), f)
	if errors.Is(err, store.ErrBadCursor) {
		return d, userError("after is not a page of this list")
	}
	if err != nil {
		return d, err
	}
	d.Events, d.Next = list, nextURL("/console/events", q, next)
	return d, nil
}

type auditData struct {
	Actions []string
	Q       map[string]string
	Entries []store.AuditEntry
	Next    string
	First   bool
}

// audit lists the audit trail newest first, by action, token and time (GET /v1/audit).
func (c *Console) auditTrail(r *http.Request, _ session) (any, error) {
	q := r.URL.Query()
	d := auditData{Actions: store.AuditActions, Q: map[string]string{}, First: q.Get("after") == ""}
	for _, k := range []string{"action", "token", "since", "until"} {
		d.Q[k] = strings.TrimSpace(q.Get(k))
	}
	if c.api.Audit == nil {
		return d, nil
	}
	f := store.AuditFilter{Action: d.Q["action"], Actor: d.Q["token"], After: q.Get("after"), Limit: consolePageSize}
	if f.Action != "" && !slices.Contains(store.AuditActions, f.Action) {
		return d, userError("unknown action")
	}
	var err error
	if f.Since, err = formTime(q, "since"); err != nil {
		return d, err
	}
	if f.Until, err = formTime(q, "until"); err != nil {
		return d, err
	}
	list, next, err := c.api.Audit.ListAudit(r.Context(), f)
	if errors.Is(err, store.ErrBadCursor) {
		return d, userError("after is not a page of this list")
	}
	if err != nil {
		return d, err
	}
	d.Entries, d.Next = list, nextURL("/console/audit", q, next)
	return d, nil
}

// recipientMessage is one message of a recipient search: its key, its status and its latest
// event.
type recipientMessage struct {
	Provider, MessageID, LastType string
	Status, BounceType            string
	LastAt                        time.Time
	Events                        int
}

// maxRecipientEvents bounds the events a recipient search reads (its newest).
const maxRecipientEvents = 500

// recipientMessages finds the messages to an address through the explorer's recipient filter
// (GET /v1/events?recipient=), newest first.
func (c *Console) recipientMessages(r *http.Request, address string) ([]recipientMessage, bool, error) {
	list, next, err := c.api.Explorer.ListEvents(r.Context(), store.EventFilter{Recipient: address, Limit: maxRecipientEvents})
	if err != nil {
		return nil, false, err
	}
	var out []recipientMessage
	at := map[[2]string]int{}
	for _, e := range list {
		if e.MessageID == "" {
			continue
		}
		k := [2]string{e.Provider, e.MessageID}
		i, ok := at[k]
		if !ok {
			at[k] = len(out)
			out = append(out, recipientMessage{Provider: e.Provider, MessageID: e.MessageID, LastType: e.Type, LastAt: e.ReceivedAt})
			i = len(out) - 1
		}
		out[i].Events++
	}
	if c.reads.MessageStatuses != nil && len(out) > 0 {
		keys := make([]store.MessageKey, len(out))
		for i, m := range out {
			keys[i] = store.MessageKey{Provider: m.Provider, MessageID: m.MessageID}
		}
		st, err := c.reads.MessageStatuses(r.Context(), keys)
		if err != nil {
			return nil, false, err
		}
		for i, k := range keys {
			out[i].Status, out[i].BounceType = st[k].Status, st[k].BounceType
		}
	}
	return out, next != "", nil
}

// timelinePageSize is the events a message's page shows: an ordinary message's all of them; a
// busy message's a page at a time, with links to the earlier and later ones
// (docs/operations/console.md, "Server time").
const timelinePageSize = store.DefaultTimelineLimit

// shownTimeline is a page of a timeline as the page renders it, with the links to the pages
// before and after it.
type shownTimeline struct {
	store.Timeline
	Older, Newer string
}

// timelineOf is a page of the message's timeline with its Temporal UI links: the first events,
// or those after (newer) or before (older) the cursor in q.
func (c *Console) timelineOf(r *http.Request, provider, id string) (*shownTimeline, error) {
	q := r.URL.Query()
	page := store.TimelinePage{Limit: timelinePageSize, After: q.Get("after"), Before: q.Get("before")}
	if page.After != "" && page.Before != "" {
		return nil, userError("after and before: one page at a time")
	}
	t, err := c.api.Explorer.Timeline(r.Context(), provider, id, page, delivery.ErrorClass)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return nil, nil
	case errors.Is(err, store.ErrBadCursor):
		return nil, userError("after or before is not a page of this timeline")
	case err != nil:
		return nil, err
	}
	for i := range t.Events {
		t.Events[i].WorkflowURL = c.api.WorkflowURL(t.Events[i].WorkflowID)
	}
	for i := range t.Workflows {
		t.Workflows[i].URL = c.api.WorkflowURL(t.Workflows[i].WorkflowID)
	}
	return &shownTimeline{Timeline: t, Older: pageURL("/console/messages", q, "before", t.PrevBefore),
		Newer: pageURL("/console/messages", q, "after", t.NextAfter)}, nil
}

// fields formats an audit entry's params or detail, keys sorted, empty values left out.
func fields(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v == nil || v == "" || v == false {
			continue
		}
		if p, ok := v.(*time.Time); ok && p == nil {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k + "=")
		switch v := m[k].(type) {
		case map[string]any:
			b.WriteString("{" + fields(v) + "}")
		case string:
			b.WriteString(strconv.Quote(v))
		default:
			b.WriteString(strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(toString(v), "[", ""), "]", "")))
		}
	}
	return b.String()
}
