package providercounts_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/providercounts"
)

// mailgunAnswer is the Metrics API's documented answer (POST /v1/analytics/metrics, the time
// dimension, day resolution), with the day asked for and the next one, which must not count.
const mailgunAnswer = `{"start":"Tue, 01 Dec 2026 00:00:00 +0000","end":"Tue, 01 Dec 2026 23:59:59 +0000","resolution":"day",
"duration":"","dimensions":["time"],"pagination":{"sort":"","skip":0,"limit":1500,"total":2},
"items":[{"dimensions":[{"dimension":"time","value":"Tue, 01 Dec 2026 00:00:00 +0000","display_value":"Tue, 01 Dec 2026 00:00:00 +0000"}],
"metrics":{"accepted_count":1010,"delivered_count":950,"permanent_failed_count":31,"temporary_failed_count":12,"opened_count":300,
"clicked_count":40,"unsubscribed_count":9,"complained_count":4}},
{"dimensions":[{"dimension":"time","value":"Wed, 02 Dec 2026 00:00:00 +0000","display_value":"Wed, 02 Dec 2026 00:00:00 +0000"}],
"metrics":{"accepted_count":5,"delivered_count":5,"permanent_failed_count":5,"temporary_failed_count":5,"opened_count":5,
"clicked_count":5,"unsubscribed_count":5,"complained_count":5}}],
"aggregates":{"metrics":{"accepted_count":1015,"delivered_count":955}}}`

func TestMailgunDayReadsTheMetricsAPI(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(mailgunAnswer))
	}))
	defer srv.Close()
	lines, err := providercounts.Mailgun{BaseURL: srv.URL, APIKey: "key-mg", Domain: "mg.example.com"}.Day(context.Background(), day.Add(13*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	user, pass, ok := got.BasicAuth()
	if got.Method != http.MethodPost || got.URL.Path != "/v1/analytics/metrics" || !ok || user != "api" || pass != "key-mg" ||
		got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s %v", got.Method, got.URL, got.Header)
	}
	var q struct {
		Start, End, Resolution string
		Dimensions, Metrics    []string
		Filter                 struct {
			AND []struct {
				Attribute, Comparator string
				Values                []struct{ Label, Value string }
			}
		}
	}
	if err := json.Unmarshal(body, &q); err != nil {
		t.Fatalf("request body %s: %v", body, err)
	}
	if q.Start != "Tue, 01 Dec 2026 00:00:00 +0000" || q.End != "Tue, 01 Dec 2026 23:59:59 +0000" || q.Resolution != "day" ||
		strings.Join(q.Dimensions, ",") != "time" || len(q.Metrics) > 10 {
		t.Errorf("request body %s", body)
	}
	if f := q.Filter.AND; len(f) != 1 || f[0].Attribute != "domain" || f[0].Comparator != "=" || len(f[0].Values) != 1 ||
		f[0].Values[0].Value != "mg.example.com" {
		t.Errorf("filter %s", body)
	}
	want := map[string]int64{"accepted": 1010, "delivered": 950, "failed": 43, "bounced": 43, "dropped": 43,
		"opened": 300, "clicked": 40, "unsubscribed": 9, "complained": 4}
	for typ, n := range want {
		if c := countFor(lines, typ); c != n {
			t.Errorf("%s: %d, want %d", typ, c, n)
		}
	}
	for _, typ := range []string{"rejected", "stored"} {
		if c := countFor(lines, typ); c != -1 {
			t.Errorf("%s is compared (%d): the Metrics API asked has no count for it", typ, c)
		}
	}
}

// A day on which nothing was sent may come back without items: that is a count of zero, the
// API having answered.
func TestMailgunDayWithoutItemsIsZero(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"start":"Tue, 01 Dec 2026 00:00:00 +0000","end":"Tue, 01 Dec 2026 23:59:59 +0000","resolution":"day","dimensions":["time"],"items":[]}`))
	}))
	defer srv.Close()
	lines, err := providercounts.Mailgun{BaseURL: srv.URL, APIKey: "k", Domain: "d"}.Day(context.Background(), day)
	if err != nil || countFor(lines, "delivered") != 0 {
		t.Fatalf("lines %v, err %v", lines, err)
	}
}
