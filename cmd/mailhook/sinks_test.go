package main

import (
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/delivery"
)

// sinks list shows a last error only while the sink has not recovered: a closed sink with no
// failure since keeps it in GET /v1/sinks (with last_error_at), but in the table it would read as
// the present state (issue 44).
func TestSinksListShowsTheLastErrorOnlyUntilRecovery(t *testing.T) {
	const boom = "POST http://crm/: 503 Service Unavailable"
	now := time.Now()
	for _, tc := range []struct {
		sk   delivery.Sink
		show bool
	}{
		{delivery.Sink{Name: "crm", State: delivery.Closed, LastError: boom}, false},
		{delivery.Sink{Name: "crm", State: delivery.Closed, ConsecutiveFailures: 2, LastError: boom}, true},
		{delivery.Sink{Name: "crm", State: delivery.Open, LastError: boom}, true},
		{delivery.Sink{Name: "crm", State: delivery.Draining, LastError: boom}, true},
	} {
		var out strings.Builder
		printSinks(&out, []delivery.Sink{tc.sk}, []config.Sink{{Name: "crm"}}, now)
		if got := strings.Contains(out.String(), boom); got != tc.show {
			t.Errorf("state %s, %d failures: last error shown %v, want %v:\n%s", tc.sk.State, tc.sk.ConsecutiveFailures, got, tc.show, out.String())
		}
	}
}
