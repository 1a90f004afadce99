package providercounts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Mailgun reads the Metrics API for one sending domain's day: POST /v1/analytics/metrics with
// resolution "day", the time dimension and a filter on the domain, with Basic auth api:<key>.
// The key must be an account API key (a domain sending key may only send); where the plan has
// key roles, the Analyst role (read-only) is the least that can read metrics. The older
// GET /v3/{domain}/stats/total is deprecated in favour of this API. The day is asked for with
// +0000 dates (Mailgun's stats have been UTC days), and Mailgun counts raw events, one per
// recipient, as its webhooks report them.
type Mailgun struct {
	// BaseURL is https://api.mailgun.net (https://api.eu.mailgun.net for EU domains); a test's
	// server otherwise.
	BaseURL string
	APIKey  string
	Domain  string
	Client  *http.Client
}

// mailgunMetrics are the metrics asked for: the API answers at most 10 a request, and these are
// the ones a webhook type compares with (docs/PROVIDERS.md cites the definitions).
var mailgunMetrics = []string{
	"accepted_count", "delivered_count", "permanent_failed_count", "temporary_failed_count",
	"opened_count", "clicked_count", "unsubscribed_count", "complained_count",
}

// mailgunDate is RFC 2822's date-time, which the Metrics API takes and answers in.
const mailgunDate = "Mon, 02 Jan 2006 15:04:05 -0700"

// mailgunFilter is one clause of the request's filter: {"attribute":"domain","comparator":"=",
// "values":[{"label":D,"value":D}]}.
type mailgunFilter struct {
	Attribute  string         `json:"attribute"`
	Comparator string         `json:"comparator"`
	Values     []mailgunValue `json:"values"`
}

type mailgunValue struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// Day reads day's counts.
func (m Mailgun) Day(ctx context.Context, day time.Time) ([]Line, error) {
	start := day.UTC().Truncate(24 * time.Hour)
	d := start.Format(DateLayout)
	domainFilter := mailgunFilter{Attribute: "domain", Comparator: "=", Values: []mailgunValue{{m.Domain, m.Domain}}}
	body, err := json.Marshal(map[string]any{
		"start": start.Format(mailgunDate),
		// The last second of the day: whether end is inclusive is not documented, and the
		// answer's items are matched to the day by their time dimension anyway.
		"end":        start.Add(24*time.Hour - time.Second).Format(mailgunDate),
		"resolution": "day",
		"dimensions": []string{"time"},
		"metrics":    mailgunMetrics,
		"filter":     map[string]any{"AND": []mailgunFilter{domainFilter}},
	})
	if err != nil {
		return nil, fmt.Errorf("mailgun metrics: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.BaseURL+"/v1/analytics/metrics", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("mailgun metrics: %w", err)
	}
	req.SetBasicAuth("api", m.APIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	answer, err := get(m.Client, "mailgun", req)
	if err != nil {
		return nil, fmt.Errorf("mailgun metrics for %s of %s: %w", m.Domain, d, err)
	}
	var r struct {
		Items *[]struct {
			Dimensions []struct {
				Dimension string `json:"dimension"`
				Value     string `json:"value"`
			} `json:"dimensions"`
			Metrics map[string]json.RawMessage `json:"metrics"`
		} `json:"items"`
	}
	if err := json.Unmarshal(answer, &r); err != nil {
		return nil, refused("mailgun", http.StatusOK, "metrics answer", err)
	}
	if r.Items == nil {
		return nil, refused("mailgun", http.StatusOK, "metrics answer", fmt.Errorf("no items field"))
	}
	// A day without events may come back as no item at all: the answer is still a count of zero.
	sum := map[string]int64{}
	for _, it := range *r.Items {
		var at time.Time
		for _, dim := range it.Dimensions {
			if dim.Dimension == "time" {
				at, err = parseMailgunDate(dim.Value)
				if err != nil {
					return nil, refused("mailgun", http.StatusOK, "metrics item time", err)
				}
			}
		}
		if at.IsZero() {
			return nil, refused("mailgun", http.StatusOK, "metrics answer", fmt.Errorf("an item without its time dimension"))
		}
		if at.UTC().Format(DateLayout) != d {
			continue
		}
		for _, name := range mailgunMetrics {
			raw, ok := it.Metrics[name]
			if !ok || string(raw) == "null" {
				continue // a metric with no event that day may be left out
			}
			var n int64
			if err := json.Unmarshal(raw, &n); err != nil || n < 0 {
				return nil, refused("mailgun", http.StatusOK, "metric "+name, fmt.Errorf("not a count"))
			}
			sum[name] += n
		}
	}
	failed := sum["permanent_failed_count"] + sum["temporary_failed_count"]
	return []Line{
		{Metric: "accepted", Count: sum["accepted_count"], Types: []string{"accepted"},
			Note: "accepted_count: outgoing and incoming (routes, forwards, mailing lists); a batch send adds one for the request"},
		{Metric: "delivered", Count: sum["delivered_count"], Types: []string{"delivered"}},
		{Metric: "failed", Count: failed, Types: []string{"failed", "bounced", "dropped"},
			Note: fmt.Sprintf(`permanent_failed_count %d + temporary_failed_count %d: mailhook types both severities "failed" `+
				`(legacy webhooks: "bounced", "dropped"); a message failing temporarily several times counts each time`,
				sum["permanent_failed_count"], sum["temporary_failed_count"])},
		{Metric: "opened", Count: sum["opened_count"], Types: []string{"opened"}, Note: "every open (opened_count), not unique opens"},
		{Metric: "clicked", Count: sum["clicked_count"], Types: []string{"clicked"}, Note: "every click (clicked_count), not unique clicks"},
		{Metric: "unsubscribed", Count: sum["unsubscribed_count"], Types: []string{"unsubscribed"}},
		{Metric: "complained", Count: sum["complained_count"], Types: []string{"complained"}},
	}, nil
}

// parseMailgunDate reads an RFC 2822 date as the Metrics API writes it ("+0000"; "UTC" in
// older answers of the Stats API).
func parseMailgunDate(s string) (time.Time, error) {
	for _, layout := range []string{mailgunDate, time.RFC1123} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("not an RFC 2822 date")
}
