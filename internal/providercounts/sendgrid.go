package providercounts

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// SendGrid reads the Stats API's global statistics for a day: GET /v3/stats?start_date=D&
// end_date=D&aggregated_by=day with an API key holding the stats.read scope (the least that
// works). SendGrid counts per recipient, as its webhooks report per recipient.
type SendGrid struct {
	// BaseURL is https://api.sendgrid.com (https://api.eu.sendgrid.com for EU subusers); a
	// test's server otherwise.
	BaseURL string
	APIKey  string
	Client  *http.Client
}

// sendGridMetrics are the Stats API's metrics (docs/PROVIDERS.md cites the reference).
type sendGridMetrics struct {
	Blocks          int64 `json:"blocks"`
	BounceDrops     int64 `json:"bounce_drops"`
	Bounces         int64 `json:"bounces"`
	Clicks          int64 `json:"clicks"`
	Deferred        int64 `json:"deferred"`
	Delivered       int64 `json:"delivered"`
	InvalidEmails   int64 `json:"invalid_emails"`
	Opens           int64 `json:"opens"`
	Processed       int64 `json:"processed"`
	SpamReportDrops int64 `json:"spam_report_drops"`
	SpamReports     int64 `json:"spam_reports"`
	UnsubscribeDrop int64 `json:"unsubscribe_drops"`
	Unsubscribes    int64 `json:"unsubscribes"`
}

// Day reads day's counts (the API's days are UTC).
func (s SendGrid) Day(ctx context.Context, day time.Time) ([]Line, error) {
	d := day.UTC().Format(DateLayout)
	q := url.Values{"start_date": {d}, "end_date": {d}, "aggregated_by": {"day"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.BaseURL+"/v3/stats?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("sendgrid stats: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+s.APIKey)
	req.Header.Set("Accept", "application/json")
	body, err := get(s.Client, "sendgrid", req)
	if err != nil {
		return nil, fmt.Errorf("sendgrid stats for %s: %w", d, err)
	}
	var days []struct {
		Date  string `json:"date"`
		Stats []struct {
			Metrics sendGridMetrics `json:"metrics"`
		} `json:"stats"`
	}
	if err := json.Unmarshal(body, &days); err != nil {
		return nil, refused("sendgrid", http.StatusOK, "stats answer", err)
	}
	var m sendGridMetrics
	for _, day := range days {
		if day.Date != d {
			continue
		}
		for _, st := range day.Stats {
			x := st.Metrics
			m.Blocks += x.Blocks
			m.BounceDrops += x.BounceDrops
			m.Bounces += x.Bounces
			m.Clicks += x.Clicks
			m.Deferred += x.Deferred
			m.Delivered += x.Delivered
			m.InvalidEmails += x.InvalidEmails
			m.Opens += x.Opens
			m.Processed += x.Processed
			m.SpamReportDrops += x.SpamReportDrops
			m.SpamReports += x.SpamReports
			m.UnsubscribeDrop += x.UnsubscribeDrop
			m.Unsubscribes += x.Unsubscribes
		}
	}
	return []Line{
		{Metric: "processed", Count: m.Processed, Types: []string{"processed"}},
		{Metric: "delivered", Count: m.Delivered, Types: []string{"delivered"}},
		{Metric: "bounces and blocks", Count: m.Bounces + m.Blocks, Types: []string{"bounce"},
			Note: `a "bounce" webhook carries type bounce or blocked; the Stats API counts them apart`},
		{Metric: "drops", Count: m.BounceDrops + m.SpamReportDrops + m.UnsubscribeDrop + m.InvalidEmails, Types: []string{"dropped"},
			Note: "bounce_drops + spam_report_drops + unsubscribe_drops + invalid_emails"},
		{Metric: "deferred", Count: m.Deferred, Types: []string{"deferred"},
			Note: "a message deferred several times may send a webhook per deferral"},
		{Metric: "opens", Count: m.Opens, Types: []string{"open"}, Note: "every open, not unique opens"},
		{Metric: "clicks", Count: m.Clicks, Types: []string{"click"}, Note: "every click, not unique clicks"},
		{Metric: "spam reports", Count: m.SpamReports, Types: []string{"spamreport"}},
		{Metric: "unsubscribes", Count: m.Unsubscribes, Types: []string{"unsubscribe"}},
	}, nil
}
