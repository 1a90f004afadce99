package backfill

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// mailgunLister pages through Mailgun's Events API: GET /v3/{domain}/events?begin=&end=
// &ascending=yes&limit=300 with Basic auth api:KEY, then each answer's paging.next URL, until a
// page has no items (documentation.mailgun.com, "Events": the API's own paging; an empty page
// is the end). Its items are the webhooks' event-data objects, so each becomes the body
// {"event-data": item} that the mailgun adapter parses into the same event id as the webhook of
// that event (event-data.id and the UTC day of event-data.timestamp). No signature block: the
// adapter's Parse does not read it, and there is none to give (the webhook's signature is over
// a timestamp and token the API does not return).
type mailgunLister struct {
	base   *url.URL // scheme and host every request goes to (the key is never sent elsewhere)
	first  string
	client *client
}

// mailgunPageSize is the Events API's largest page.
const mailgunPageSize = 300

func newMailgun(base, apiKey, domain string, since, until time.Time, hc *http.Client, perSecond float64) (*mailgunLister, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("backfill: reconcile.base_url is not an absolute URL")
	}
	q := url.Values{
		"begin":     {strconv.FormatInt(since.Unix(), 10)},
		"end":       {strconv.FormatInt(until.Unix(), 10)},
		"ascending": {"yes"},
		"limit":     {strconv.Itoa(mailgunPageSize)},
	}
	first := u.JoinPath("v3", domain, "events")
	first.RawQuery = q.Encode()
	auth := func(r *http.Request) { r.SetBasicAuth("api", apiKey) }
	return &mailgunLister{base: u, first: first.String(), client: newClient("mailgun", hc, perSecond, auth)}, nil
}

// Page fetches the page at cursor: "" is the window's first page, anything else a paging.next
// URL Mailgun returned.
func (m *mailgunLister) Page(ctx context.Context, cursor string) (Page, error) {
	u := m.first
	if cursor != "" {
		next, err := url.Parse(cursor)
		// The next URL is Mailgun's; the key goes with it only to the host it was configured for.
		if err != nil || next.Scheme != m.base.Scheme || next.Host != m.base.Host {
			return Page{}, fmt.Errorf("%w: mailgun API: the next-page URL is not on the configured API host", ErrRefused)
		}
		u = cursor
	}
	body, err := m.client.get(ctx, u)
	if err != nil {
		return Page{}, fmt.Errorf("list mailgun events: %w", err)
	}
	var ans struct {
		Items  []json.RawMessage `json:"items"`
		Paging struct {
			Next string `json:"next"`
		} `json:"paging"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return Page{}, fmt.Errorf("%w: mailgun API: the events answer is not {\"items\":[…],\"paging\":{…}}", ErrRefused)
	}
	if len(ans.Items) == 0 {
		return Page{Last: true}, nil
	}
	p := Page{Bodies: make([][]byte, len(ans.Items)), Next: ans.Paging.Next}
	for i, it := range ans.Items {
		p.Bodies[i] = MailgunWebhookBody(it)
	}
	if p.Next == "" {
		// Mailgun always links a next page; without one there is nothing to follow.
		p.Last = true
	}
	return p, nil
}

// MailgunWebhookBody is the webhook body carrying an Events API item: {"event-data": item}.
func MailgunWebhookBody(item json.RawMessage) []byte {
	b := make([]byte, 0, len(item)+16)
	b = append(b, `{"event-data":`...)
	b = append(b, item...)
	return append(b, '}')
}
