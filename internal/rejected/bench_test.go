package rejected_test

import (
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/rejected"
)

// BenchmarkBadlySignedRequest is one badly signed request over real HTTP, answered 401: with the
// refusal kept (within a budget that never runs out here, so every one is copied and queued),
// and without a recorder, the tree before. Compare ns/op and allocs/op.
//
//	go test -run '^$' -bench BadlySigned -benchtime 3000x ./internal/rejected
func BenchmarkBadlySignedRequest(b *testing.B) {
	for _, keep := range []bool{false, true} {
		name := map[bool]string{false: "not-kept", true: "kept"}[keep]
		b.Run(name, func(b *testing.B) {
			r := newBenchRig(b, keep)
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

func newBenchRig(b *testing.B, keep bool) *rig {
	budget := rejected.Budget{RowsPerHour: 1 << 30, BytesPerHour: 1 << 50, MaxBodyBytes: 64 << 10}
	r := newRigTB(b, budget, keep)
	if !keep {
		r.server.Rejected = nil
	}
	return r
}
