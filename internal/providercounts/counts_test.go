package providercounts_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/providercounts"
)

var day = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// sendGridAnswer is the Stats API's documented shape (one day, aggregated_by=day), with
// distinct numbers so that a metric read from the wrong field shows.
const sendGridAnswer = `[{"date":"2026-12-01","stats":[{"metrics":{"blocks":3,"bounce_drops":5,"bounces":17,
"clicks":40,"deferred":7,"delivered":950,"invalid_emails":2,"opens":300,"processed":1000,"requests":1010,
"spam_report_drops":1,"spam_reports":4,"unique_clicks":20,"unique_opens":150,"unsubscribe_drops":6,"unsubscribes":9}}]}]`

func TestSendGridDayReadsTheStatsAPI(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(sendGridAnswer))
	}))
	defer srv.Close()
	lines, err := providercounts.SendGrid{BaseURL: srv.URL, APIKey: "SG.key"}.Day(context.Background(), day)
	if err != nil {
		t.Fatal(err)
	}
	if got.URL.Path != "/v3/stats" || got.URL.Query().Get("start_date") != "2026-12-01" || got.URL.Query().Get("end_date") != "2026-12-01" ||
		got.URL.Query().Get("aggregated_by") != "day" || got.Header.Get("Authorization") != "Bearer SG.key" {
		t.Errorf("request %s %v", got.URL, got.Header)
	}
	want := map[string]int64{"processed": 1000, "delivered": 950, "bounce": 20, "dropped": 14, "deferred": 7,
		"open": 300, "click": 40, "spamreport": 4, "unsubscribe": 9}
	for typ, n := range want {
		if c := countFor(lines, typ); c != n {
			t.Errorf("%s: %d, want %d", typ, c, n)
		}
	}
}

func TestPostmarkDayReadsTheOutboundOverview(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		// The documented fields of GET /stats/outbound.
		_, _ = w.Write([]byte(`{"Sent":615,"Bounced":64,"SMTPApiErrors":25,"BounceRate":10.406,"SpamComplaints":10,
"SpamComplaintsRate":1.626,"Opens":166,"UniqueOpens":26,"Tracked":111,"WithLinkTracking":90,"WithOpenTracking":51,
"TotalTrackedLinksSent":60,"UniqueLinksClicked":30,"TotalClicks":72,"WithClientRecorded":14,"WithPlatformRecorded":10,"WithReadTimeRecorded":10}`))
	}))
	defer srv.Close()
	lines, err := providercounts.Postmark{BaseURL: srv.URL, ServerToken: "tok", MessageStream: "outbound"}.Day(context.Background(), day)
	if err != nil {
		t.Fatal(err)
	}
	q := got.URL.Query()
	if got.URL.Path != "/stats/outbound" || q.Get("fromdate") != "2026-12-01" || q.Get("todate") != "2026-12-01" ||
		q.Get("messagestream") != "outbound" || got.Header.Get("X-Postmark-Server-Token") != "tok" {
		t.Errorf("request %s %v", got.URL, got.Header)
	}
	for typ, n := range map[string]int64{"Bounce:HardBounce": 64, "Bounce:SoftBounce": 64, "SpamComplaint": 10, "Open": 166, "Click": 72} {
		if c := countFor(lines, typ); c != n {
			t.Errorf("%s: %d, want %d", typ, c, n)
		}
	}
	if c := countFor(lines, "Delivery"); c != -1 {
		t.Errorf("Delivery is compared (%d): the overview has no delivered count", c)
	}
}

// What mailhook received is summed over the types a line names, so Postmark's bounce subtypes
// compare with its one Bounced count.
func TestLineReceivedSumsItsTypes(t *testing.T) {
	l := providercounts.Line{Metric: "bounced", Prefixes: []string{"Bounce"}, Types: []string{"x"}}
	got := l.Received(map[string]int64{"Bounce:HardBounce": 3, "Bounce:SoftBounce": 2, "x": 1, "Open": 50})
	if got != 6 {
		t.Errorf("received %d, want 6", got)
	}
}

// A provider API that is down, slow to answer or refusing is an error of its kind, never a zero
// count; what it says in its body is not repeated.
func TestAPIFailuresAreErrorsNotZeroCounts(t *testing.T) {
	for _, c := range []struct {
		name       string
		status     int
		retryAfter string
		body       string
		want       error
		wait       time.Duration
	}{
		{"bad key", http.StatusUnauthorized, "", `{"errors":[{"message":"authorization required SG.key"}]}`, providercounts.ErrRefused, 0},
		{"forbidden scope", http.StatusForbidden, "", `{}`, providercounts.ErrRefused, 0},
		{"rate limited", http.StatusTooManyRequests, "7", `{}`, providercounts.ErrUnavailable, 7 * time.Second},
		{"down", http.StatusBadGateway, "", `bad gateway`, providercounts.ErrUnavailable, 0},
		{"not the documented shape", http.StatusOK, "", `{"unexpected":true}`, providercounts.ErrRefused, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.retryAfter != "" {
					w.Header().Set("Retry-After", c.retryAfter)
				}
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			for _, counter := range []providercounts.Counter{
				providercounts.SendGrid{BaseURL: srv.URL, APIKey: "SG.key"},
				providercounts.Postmark{BaseURL: srv.URL, ServerToken: "tok"},
				providercounts.Mailgun{BaseURL: srv.URL, APIKey: "SG.key", Domain: "mg.example.com"},
			} {
				lines, err := counter.Day(context.Background(), day)
				if !errors.Is(err, c.want) || lines != nil {
					t.Fatalf("%T: %v lines, err %v, want %v", counter, lines, err, c.want)
				}
				if w := providercounts.RetryAfter(err); w != c.wait {
					t.Errorf("%T: retry after %s, want %s", counter, w, c.wait)
				}
				if strings.Contains(err.Error(), "SG.key") || strings.Contains(err.Error(), "authorization required") {
					t.Errorf("%T: the error repeats the API's answer: %v", counter, err)
				}
			}
		})
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens: no answer at all
	for _, counter := range []providercounts.Counter{providercounts.SendGrid{BaseURL: srv.URL}, providercounts.Mailgun{BaseURL: srv.URL}} {
		if _, err := counter.Day(context.Background(), day); !errors.Is(err, providercounts.ErrUnavailable) {
			t.Errorf("%T: no answer: %v, want ErrUnavailable", counter, err)
		}
	}
}

// countFor is the count of the line events of typ are compared with, or -1 when none is.
func countFor(lines []providercounts.Line, typ string) int64 {
	for _, l := range lines {
		if l.Matches(typ) {
			return l.Count
		}
	}
	return -1
}

// A gap is the provider's count minus what was received, inside or outside its metric's
// tolerance: 37 bounces never delivered as webhooks are a gap; a count within 1 % is not.
func TestCompareFindsGapsOutsideTheTolerance(t *testing.T) {
	lines := []providercounts.Line{
		{Metric: "bounced", Count: 100, Prefixes: []string{"Bounce"}},
		{Metric: "opens", Count: 1000, Types: []string{"Open"}},
		{Metric: "clicks", Count: 10, Types: []string{"Click"}},
	}
	received := map[string]int64{"Bounce:HardBounce": 50, "Bounce:SoftBounce": 13, "Open": 995, "Click": 12}
	got := providercounts.Compare(lines, received, map[string]providercounts.Tolerance{"opens": {Fraction: 0.01}}, providercounts.Tolerance{})
	want := []struct {
		received, gap int64
		within        bool
	}{{63, 37, false}, {995, 5, true}, {12, -2, false}}
	for i, w := range want {
		if got[i].Received != w.received || got[i].Gap != w.gap || got[i].Within != w.within {
			t.Errorf("%s: received %d gap %d within %v, want %d %d %v", got[i].Metric, got[i].Received, got[i].Gap, got[i].Within, w.received, w.gap, w.within)
		}
	}
}
