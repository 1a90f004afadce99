package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

var metricName = regexp.MustCompile(`mailhook_[a-z_]+`)

// Every metric an alert fires on has a panel in the Grafana dashboard: whoever is paged can see
// where it came from and for how long (issue 27: the waiting-events and quarantine gauges had
// none).
func TestTheDashboardShowsEveryMetricAnAlertUses(t *testing.T) {
	rules, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	alerted := map[string]bool{}
	for line := range strings.SplitSeq(string(rules), "\n") {
		if expr, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:"); ok {
			for _, m := range metricName.FindAllString(expr, -1) {
				alerted[m] = true
			}
		}
	}
	if len(alerted) < 5 {
		t.Fatalf("only %d metrics found in the alert rules' exprs: %v", len(alerted), alerted)
	}
	raw, err := os.ReadFile("../../deploy/grafana/dashboards/mailhook.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range metricName.FindAllString(tg.Expr, -1) {
				shown[strings.TrimSuffix(m, "_bucket")] = true
			}
		}
	}
	for m := range alerted {
		if !shown[m] {
			t.Errorf("%s is alerted on but no dashboard panel shows it", m)
		}
	}
}
