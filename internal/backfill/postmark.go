package backfill

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	_ "time/tzdata" // Postmark's dates are US Eastern time: the zone must exist in a bare container too
)

// postmarkLister lists Postmark's bounces: GET /bounces?count=500&offset=N&fromdate=&todate=
// [&messagestream=] with X-Postmark-Server-Token (postmarkapp.com/developer/api/bounce-api).
// The Bounce API holds bounces and spam complaints (Type "SpamComplaint"), with the bounce ID
// the webhooks carry, so each becomes the webhook record of that event (PostmarkWebhookBody)
// and parses into its event id, "bounce:<ID>".
//
// Postmark refuses offset+count over 10,000: a window holding more (TotalCount) is split in
// halves until each holds at most that, and the halves are listed in turn. fromdate and todate
// are inclusive and in US Eastern time, to the second.
//
// Deliveries, opens and clicks are not listed: Postmark has no list of delivery events (a
// message's MessageEvents come one message per call, and their times are not the webhook's
// DeliveredAt text the delivery's event id is derived from, so they would not dedupe against
// the webhooks mailhook has); the opens and clicks APIs are the same case (docs/operations/backfill.md).
type postmarkLister struct {
	base   *url.URL
	stream string
	since  time.Time
	until  time.Time
	client *client
}

const (
	postmarkPageSize = 500
	// postmarkMaxOffset is the Bounce API's bound on offset+count.
	postmarkMaxOffset = 10000
)

var eastern = mustLoad("America/New_York")

func mustLoad(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err) // time/tzdata is linked in
	}
	return l
}

func newPostmark(base, token, stream string, since, until time.Time, hc *http.Client, perSecond float64) (*postmarkLister, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("backfill: reconcile.base_url is not an absolute URL")
	}
	auth := func(r *http.Request) { r.Header.Set("X-Postmark-Server-Token", token) }
	return &postmarkLister{base: u, stream: stream, since: since, until: until, client: newClient("postmark", hc, perSecond, auth)}, nil
}

// postmarkCursor is where a Postmark listing is: the sub-windows still to list (the first one
// being listed) and the offset in the first. Saved as JSON in backfill_progress.cursor.
type postmarkCursor struct {
	Windows [][2]time.Time `json:"windows"`
	Offset  int            `json:"offset"`
}

// Page fetches the page at cursor ("": the window's first).
func (p *postmarkLister) Page(ctx context.Context, cursor string) (Page, error) {
	cur := postmarkCursor{Windows: [][2]time.Time{{p.since, p.until}}}
	if cursor != "" {
		if err := json.Unmarshal([]byte(cursor), &cur); err != nil || len(cur.Windows) == 0 || cur.Offset < 0 {
			return Page{}, fmt.Errorf("backfill: the saved postmark cursor is not one this version wrote")
		}
	}
	for {
		w := cur.Windows[0]
		total, items, err := p.fetch(ctx, w[0], w[1], cur.Offset)
		if err != nil {
			return Page{}, err
		}
		if cur.Offset == 0 && total > postmarkMaxOffset {
			// Not reachable by offsets: list its halves instead (this answer's items come again
			// with the first half).
			if w[1].Sub(w[0]) <= time.Second {
				return Page{}, fmt.Errorf("%w: postmark API: more than %d bounces within one second (%s); the Bounce API cannot list them",
					ErrRefused, postmarkMaxOffset, w[0].UTC().Format(time.RFC3339))
			}
			mid := w[0].Add(w[1].Sub(w[0]) / 2).Truncate(time.Second)
			if !mid.After(w[0]) {
				mid = w[0].Add(time.Second)
			}
			cur.Windows = append([][2]time.Time{{w[0], mid}, {mid, w[1]}}, cur.Windows[1:]...)
			continue
		}
		page := Page{Bodies: make([][]byte, 0, len(items))}
		for _, it := range items {
			b, err := PostmarkWebhookBody(it, p.stream)
			if err != nil {
				return Page{}, err
			}
			page.Bodies = append(page.Bodies, b)
		}
		cur.Offset += len(items)
		if len(items) == 0 || cur.Offset >= total || cur.Offset >= postmarkMaxOffset {
			cur.Windows, cur.Offset = cur.Windows[1:], 0
		}
		if len(cur.Windows) == 0 {
			page.Last = true
			return page, nil
		}
		next, err := json.Marshal(cur)
		if err != nil {
			return Page{}, fmt.Errorf("backfill: postmark cursor: %w", err)
		}
		page.Next = string(next)
		return page, nil
	}
}

func (p *postmarkLister) fetch(ctx context.Context, from, to time.Time, offset int) (int, []json.RawMessage, error) {
	q := url.Values{
		"count":    {strconv.Itoa(min(postmarkPageSize, postmarkMaxOffset-offset))},
		"offset":   {strconv.Itoa(offset)},
		"fromdate": {easternTime(from, false)},
		"todate":   {easternTime(to, true)},
	}
	if p.stream != "" {
		q.Set("messagestream", p.stream)
	}
	u := p.base.JoinPath("bounces")
	u.RawQuery = q.Encode()
	body, err := p.client.get(ctx, u.String())
	if err != nil {
		return 0, nil, fmt.Errorf("list postmark bounces: %w", err)
	}
	var ans struct {
		TotalCount *int              `json:"TotalCount"`
		Bounces    []json.RawMessage `json:"Bounces"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || ans.TotalCount == nil {
		return 0, nil, fmt.Errorf("%w: postmark API: the bounces answer is not {\"TotalCount\":…,\"Bounces\":[…]}", ErrRefused)
	}
	return *ans.TotalCount, ans.Bounces, nil
}

// easternTime is t as the Bounce API's fromdate or todate: US Eastern wall time to the second,
// rounded outwards (todate up). Within an hour of a daylight-saving change the wall time is
// ambiguous, so the bound moves an hour outwards: a bounce listed twice is a duplicate, one
// missed is lost.
func easternTime(t time.Time, upper bool) string {
	if upper && !t.Truncate(time.Second).Equal(t) {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	_, before := t.Add(-time.Hour).In(eastern).Zone()
	_, after := t.Add(time.Hour).In(eastern).Zone()
	if before != after {
		if upper {
			t = t.Add(time.Hour)
		} else {
			t = t.Add(-time.Hour)
		}
	}
	return t.In(eastern).Format("2006-01-02T15:04:05")
}

// PostmarkWebhookBody is the bounce webhook record of a Bounce API item. The item is the
// webhook's record but for what only the webhook says: RecordType ("Bounce", or
// "SpamComplaint" for a spam complaint, as Postmark's spam complaint webhook sends it) and,
// when the answer leaves it out, MessageStream (the stream listed: stream, else Postmark's
// default "outbound"), which mailhook maps to a suppression scope. Everything else is the item's
// own bytes.
func PostmarkWebhookBody(item json.RawMessage, stream string) ([]byte, error) {
	var head struct {
		RecordType    *string `json:"RecordType"`
		Type          string  `json:"Type"`
		MessageStream *string `json:"MessageStream"`
	}
	if t := bytes.TrimSpace(item); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &head) != nil {
		return nil, fmt.Errorf("%w: postmark API: a bounce is not a JSON object", ErrRefused)
	}
	var add []byte
	if head.RecordType == nil {
		rt := "Bounce"
		if head.Type == "SpamComplaint" {
			rt = "SpamComplaint"
		}
		add = fmt.Appendf(add, `"RecordType":%q,`, rt)
	}
	if head.MessageStream == nil {
		if stream == "" {
			stream = "outbound"
		}
		s, _ := json.Marshal(stream)
		add = append(append(append(add, `"MessageStream":`...), s...), ',')
	}
	if len(add) == 0 {
		return bytes.Clone(item), nil
	}
	rest := bytes.TrimSpace(item)[1:] // after '{': an object, as decoded above
	if t := bytes.TrimSpace(rest); len(t) == 1 && t[0] == '}' {
		add = add[:len(add)-1] // an empty object: no comma before its '}'
	}
	out := make([]byte, 0, len(item)+len(add)+1)
	out = append(append(append(out, '{'), add...), rest...)
	return out, nil
}
