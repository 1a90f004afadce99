package metrics

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The SDK's latencies are histograms (aggregatable across workers), and the build is labelled.
func TestTemporalLatenciesAreHistogramsAndBuildInfoIsExported(t *testing.T) {
	m := New()
	h, closeHandler := m.TemporalHandler()
	h.Timer("temporal_request_latency").Record(40 * time.Millisecond)
	closeHandler() // flushes the tally scope into the registry

	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
	}
	lat := byName["temporal_request_latency_seconds"]
	if lat == nil || lat.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("temporal_request_latency_seconds: %v, want a histogram", lat)
	}
	if got := lat.GetMetric()[0].GetHistogram().GetSampleCount(); got != 1 {
		t.Fatalf("sample count %d", got)
	}
	bi := byName["mailhook_build_info"]
	if bi == nil || bi.GetMetric()[0].GetGauge().GetValue() != 1 || len(bi.GetMetric()[0].GetLabel()) != 3 {
		t.Fatalf("mailhook_build_info: %v", bi)
	}
}
