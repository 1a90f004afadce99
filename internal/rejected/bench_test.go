package rejected_test

import (
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/rejected"
)

// BenchmarkBadlySignedRequest is one badly signed request over real HTTP, answered 401: with the
// refusal kept (within a budget that never runs out here, so every one is copied and queued),
// with the budget spent (a flood's steady state: every one counted as dropped), with recording
// off (retention.rejected_requests: 0), and without a recorder, the tree before. Compare ns/op
// and allocs/op.
//
//	go test -run '^$' -bench BadlySigned -benchtime 3000x ./internal/rejected
func BenchmarkBadlySignedRequest(b *testing.B) {
	for _, name := range []string{"not-kept", "kept", "budget-spent", "off"} {
		b.Run(name, func(b *testing.B) {
			r := newBenchRig(b, name)
			body := event("ev_bench")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if st := r.post("ps", body, "whsec_wrong", time.Now(), nil); st != 401 {
					b.Fatalf("status %d", st)
				}
			}
		})
	}
}

func newBenchRig(b *testing.B, name string) *rig {
	budget := rejected.Budget{RowsPerHour: 1 << 30, BytesPerHour: 1 << 50, MaxBodyBytes: 64 << 10}
	if name == "budget-spent" {
		budget.RowsPerHour = 0
	}
	r := newRigTB(b, budget, name != "not-kept")
	switch name {
	case "not-kept":
		r.server.Rejected = nil
	case "off":
		r.rec.Off = true
	}
	return r
}
