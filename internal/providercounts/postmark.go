package providercounts

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Postmark reads the Stats API's outbound overview for a day: GET /stats/outbound?fromdate=D&
// todate=D (both inclusive), for one message stream or all of the server's, with the server's
// API token (X-Postmark-Server-Token; Postmark has no narrower token). Postmark's stats days
// are US Eastern time, not UTC: a UTC day's webhooks and Postmark's day overlap by 19 or 20
// hours, so the counts agree over weeks, not to the event on one day (docs/PROVIDERS.md).
type Postmark struct {
	// BaseURL is https://api.postmarkapp.com; a test's server otherwise.
	BaseURL     string
	ServerToken string
	// MessageStream, when set, reads one stream's counts (a mailhook endpoint receives one
	// stream's webhooks); empty reads the server's.
	MessageStream string
	Client        *http.Client
}

// Day reads day's counts.
func (p Postmark) Day(ctx context.Context, day time.Time) ([]Line, error) {
	d := day.UTC().Format(DateLayout)
	q := url.Values{"fromdate": {d}, "todate": {d}}
	if p.MessageStream != "" {
		q.Set("messagestream", p.MessageStream)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.BaseURL+"/stats/outbound?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("postmark stats: %w", err)
	}
	req.Header.Set("X-Postmark-Server-Token", p.ServerToken)
	req.Header.Set("Accept", "application/json")
	body, err := get(p.Client, "postmark", req)
	if err != nil {
		return nil, fmt.Errorf("postmark stats for %s: %w", d, err)
	}
	var o struct {
		Sent           *int64 `json:"Sent"`
		Bounced        int64  `json:"Bounced"`
		SpamComplaints int64  `json:"SpamComplaints"`
		Opens          int64  `json:"Opens"`
		TotalClicks    int64  `json:"TotalClicks"`
	}
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, refused("postmark", http.StatusOK, "stats answer", err)
	}
	if o.Sent == nil {
		return nil, refused("postmark", http.StatusOK, "stats answer", fmt.Errorf("no Sent field"))
	}
	const eastern = "Postmark's day is US Eastern time"
	return []Line{
		{Metric: "bounced", Count: o.Bounced, Prefixes: []string{"Bounce"}, Note: eastern},
		{Metric: "spam complaints", Count: o.SpamComplaints, Types: []string{"SpamComplaint"}, Note: eastern},
		{Metric: "opens", Count: o.Opens, Types: []string{"Open"},
			Note: eastern + `; every open, while the Open webhook may be set to send the first only`},
		{Metric: "clicks", Count: o.TotalClicks, Types: []string{"Click"}, Note: eastern},
	}, nil
}
