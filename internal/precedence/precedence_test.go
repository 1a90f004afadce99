package precedence_test

import (
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/precedence"
)

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func ev(id string, s domain.Status, at time.Duration, bounce string) domain.Event {
	return domain.Event{EventID: id, Kind: domain.KindStatus, Status: s, OccurredAt: t0.Add(at), BounceType: bounce}
}

func TestApply(t *testing.T) {
	delivered := precedence.State{Status: domain.StatusDelivered, Key: precedence.KeyOf(ev("d", domain.StatusDelivered, time.Minute, "")), Version: 2}
	bouncedSoft := precedence.State{Status: domain.StatusBounced, BounceType: "soft", Key: precedence.KeyOf(ev("b", domain.StatusBounced, time.Hour, "soft")), Version: 3}
	tests := []struct {
		name               string
		cur                precedence.State
		in                 domain.Event
		wantStatus         domain.Status
		wantMoved, wantAdv bool
		wantVersion        int64
	}{
		{"first event moves from nothing", precedence.State{}, ev("a", domain.StatusAccepted, 0, ""), domain.StatusAccepted, true, true, 1},
		{"higher rank moves", delivered, ev("b", domain.StatusBounced, 2*time.Minute, "hard"), domain.StatusBounced, true, true, 3},
		{"late bounce after delivered is the supported correction", delivered, ev("b", domain.StatusBounced, -time.Hour, ""), domain.StatusBounced, true, true, 3},
		{"lower rank is stale even if newer", delivered, ev("x", domain.StatusDeferred, time.Hour, ""), domain.StatusDelivered, false, false, 2},
		{"accepted after delivered is stale", delivered, ev("s", domain.StatusAccepted, 2*time.Hour, ""), domain.StatusDelivered, false, false, 2},
		{"same rank later time advances without a visible change", delivered, ev("d2", domain.StatusDelivered, 2*time.Minute, ""), domain.StatusDelivered, false, true, 2},
		{"same rank earlier time is stale", delivered, ev("d0", domain.StatusDelivered, 0, ""), domain.StatusDelivered, false, false, 2},
		{"same event again is stale", delivered, ev("d", domain.StatusDelivered, time.Minute, ""), domain.StatusDelivered, false, false, 2},
		{"equal rank and time: greater event id wins", delivered, ev("e", domain.StatusDelivered, time.Minute, ""), domain.StatusDelivered, false, true, 2},
		{"failed after bounced (same rank, later) moves", bouncedSoft, ev("f", domain.StatusFailed, 2*time.Hour, ""), domain.StatusFailed, true, true, 4},
		{"bounce type change is a visible move", bouncedSoft, ev("b2", domain.StatusBounced, 2*time.Hour, "hard"), domain.StatusBounced, true, true, 4},
		{"complaint beats everything", bouncedSoft, ev("c", domain.StatusComplained, -24*time.Hour, ""), domain.StatusComplained, true, true, 4},
		{"an event with no status never moves", delivered, domain.Event{EventID: "z", Kind: domain.KindOpened, OccurredAt: t0.Add(time.Hour)}, domain.StatusDelivered, false, false, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := precedence.Apply(tc.cur, tc.in)
			if r.Next.Status != tc.wantStatus || r.Moved != tc.wantMoved || r.Advanced != tc.wantAdv || r.Next.Version != tc.wantVersion {
				t.Fatalf("Apply = status %q moved %v advanced %v version %d; want %q %v %v %d",
					r.Next.Status, r.Moved, r.Advanced, r.Next.Version, tc.wantStatus, tc.wantMoved, tc.wantAdv, tc.wantVersion)
			}
			if !r.Advanced && r.Next != tc.cur {
				t.Fatalf("a stale event changed the state: %+v → %+v", tc.cur, r.Next)
			}
		})
	}
}

func correction(id string, s domain.Status, at time.Duration) domain.Event {
	return domain.Event{EventID: id, Kind: domain.KindCorrection, Type: domain.CorrectionType, Status: s, OccurredAt: t0.Add(at)}
}

func TestCorrection(t *testing.T) {
	bouncedHard := precedence.State{Status: domain.StatusBounced, BounceType: "hard", Key: precedence.KeyOf(ev("b", domain.StatusBounced, time.Hour, "hard")), Version: 2}
	fix := correction("correction-1", domain.StatusDelivered, 2*time.Hour)

	r := precedence.Apply(bouncedHard, fix)
	if !r.Moved || !r.Advanced || r.Next.Status != domain.StatusDelivered || r.Next.BounceType != "" || r.Next.Version != 3 {
		t.Fatalf("correction of a bounce: %+v", r)
	}
	if r.Next.Key != precedence.KeyOf(fix) || !r.Next.CorrectedAt.Equal(fix.OccurredAt) {
		t.Fatalf("correction key %+v corrected_at %v", r.Next.Key, r.Next.CorrectedAt)
	}
	corrected := r.Next

	tests := []struct {
		name               string
		cur                precedence.State
		in                 domain.Event
		wantStatus         domain.Status
		wantBounce         string
		wantMoved, wantAdv bool
		wantVersion        int64
	}{
		{"a correction wins over a higher rank", bouncedHard, fix, domain.StatusDelivered, "", true, true, 3},
		{"a correction even when its time is before the deciding event", bouncedHard, correction("correction-0", domain.StatusDelivered, 0), domain.StatusDelivered, "", true, true, 3},
		{"a correction to the same status only clears the bounce type", bouncedHard, correction("correction-2", domain.StatusBounced, 2*time.Hour), domain.StatusBounced, "", true, true, 3},
		{"a correction that changes nothing visible advances", corrected, correction("correction-3", domain.StatusDelivered, 3*time.Hour), domain.StatusDelivered, "", false, true, 3},
		{"a correction on a fresh message", precedence.State{}, fix, domain.StatusDelivered, "", true, true, 1},
		{"an older correction after a newer one is stale", corrected, correction("correction-0", domain.StatusBounced, time.Hour), domain.StatusDelivered, "", false, false, 3},
		{"a correction to an unknown status is stale", bouncedHard, correction("correction-x", "lost", 2*time.Hour), domain.StatusBounced, "hard", false, false, 2},
		{"the old bounce again (new id, same time) is stale", corrected, ev("b-retry", domain.StatusBounced, time.Hour, "hard"), domain.StatusDelivered, "", false, false, 3},
		{"a complaint from before the correction is stale", corrected, ev("c0", domain.StatusComplained, time.Hour+time.Minute, ""), domain.StatusDelivered, "", false, false, 3},
		{"an event at exactly the correction time is stale", corrected, ev("b-tie", domain.StatusBounced, 2*time.Hour, "hard"), domain.StatusDelivered, "", false, false, 3},
		{"a bounce after the correction moves", corrected, ev("b2", domain.StatusBounced, 3*time.Hour, "hard"), domain.StatusBounced, "hard", true, true, 4},
		{"a delivered after the correction advances", corrected, ev("d2", domain.StatusDelivered, 3*time.Hour, ""), domain.StatusDelivered, "", false, true, 3},
		{"a lower rank after the correction is stale by rank", corrected, ev("s2", domain.StatusAccepted, 3*time.Hour, ""), domain.StatusDelivered, "", false, false, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := precedence.Apply(tc.cur, tc.in)
			if r.Next.Status != tc.wantStatus || r.Next.BounceType != tc.wantBounce || r.Moved != tc.wantMoved || r.Advanced != tc.wantAdv || r.Next.Version != tc.wantVersion {
				t.Fatalf("Apply = %q/%q moved %v advanced %v version %d; want %q/%q %v %v %d",
					r.Next.Status, r.Next.BounceType, r.Moved, r.Advanced, r.Next.Version, tc.wantStatus, tc.wantBounce, tc.wantMoved, tc.wantAdv, tc.wantVersion)
			}
			if !r.Advanced && r.Next != tc.cur {
				t.Fatalf("a stale event changed the state: %+v → %+v", tc.cur, r.Next)
			}
			if r.Advanced && tc.in.Kind != domain.KindCorrection && !r.Next.CorrectedAt.Equal(tc.cur.CorrectedAt) {
				t.Fatalf("a provider event moved corrected_at: %+v → %+v", tc.cur, r.Next)
			}
		})
	}
}

// TestCorrectionThenEveryArrivalOrderOfLaterEvents: once a correction is applied, the events
// that occurred before it are stale in any order, and those after it fold as usual.
func TestCorrectionThenEveryArrivalOrderOfLaterEvents(t *testing.T) {
	s := precedence.State{}
	for _, e := range []domain.Event{ev("d", domain.StatusDelivered, 0, ""), ev("b", domain.StatusBounced, time.Minute, "hard")} {
		s = precedence.Apply(s, e).Next
	}
	s = precedence.Apply(s, correction("correction-1", domain.StatusDelivered, time.Hour)).Next
	events := []domain.Event{
		ev("b", domain.StatusBounced, time.Minute, "hard"),   // the provider's retry
		ev("c", domain.StatusComplained, 30*time.Minute, ""), // before the correction
		ev("d2", domain.StatusDelivered, 2*time.Hour, ""),    // after: advances
		ev("f", domain.StatusFailed, 3*time.Hour, ""),        // after: wins
		ev("a", domain.StatusAccepted, 4*time.Hour, ""),      // after, but lower rank
	}
	var want *precedence.State
	permute(len(events), func(idx []int) {
		cur := s
		for _, i := range idx {
			cur = precedence.Apply(cur, events[i]).Next
		}
		cur.Version = 0
		if want == nil {
			want = &cur
			return
		}
		if cur != *want {
			t.Fatalf("order %v ended %+v, another order ended %+v", idx, cur, *want)
		}
	})
	if want.Status != domain.StatusFailed || want.Key.EventID != "f" || !want.CorrectedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("end state %+v, want failed decided by f, corrected_at kept", *want)
	}
}

func TestRanks(t *testing.T) {
	order := []domain.Status{domain.StatusAccepted, domain.StatusDeferred, domain.StatusDelivered, domain.StatusBounced, domain.StatusComplained}
	for i := 1; i < len(order); i++ {
		if precedence.Rank(order[i-1]) >= precedence.Rank(order[i]) {
			t.Fatalf("rank(%s) must be below rank(%s)", order[i-1], order[i])
		}
	}
	if precedence.Rank(domain.StatusFailed) != precedence.Rank(domain.StatusBounced) {
		t.Fatal("failed and bounced must share a rank")
	}
}

// TestEveryPermutationEndsTheSame: the stored state is the maximum over all events seen, so
// every arrival order, with duplicates mixed in, ends in the same status, bounce type and key,
// and the version counts exactly the moves of that order.
func TestEveryPermutationEndsTheSame(t *testing.T) {
	events := []domain.Event{
		ev("e1", domain.StatusAccepted, 0, ""),
		ev("e2", domain.StatusDeferred, time.Second, ""),
		ev("e3", domain.StatusDelivered, 2*time.Second, ""),
		ev("e4", domain.StatusBounced, 10*time.Minute, "soft"),
		ev("e5", domain.StatusFailed, 10*time.Minute, ""), // same rank and time as e4: id decides
		ev("e6", domain.StatusDelivered, 2*time.Second, ""),
	}
	var want *precedence.State
	n := 0
	permute(len(events), func(idx []int) {
		n++
		var s precedence.State
		moves := int64(0)
		seq := make([]domain.Event, 0, len(idx)+2)
		for _, i := range idx {
			seq = append(seq, events[i])
		}
		// Duplicates: the first and the middle event re-delivered at the end.
		seq = append(seq, events[idx[0]], events[idx[len(idx)/2]])
		for _, e := range seq {
			r := precedence.Apply(s, e)
			if r.Moved {
				moves++
			}
			if r.Next.Version < s.Version {
				t.Fatalf("version went backwards")
			}
			s = r.Next
		}
		if s.Version != moves {
			t.Fatalf("version %d != moves %d", s.Version, moves)
		}
		end := s
		end.Version = 0
		if want == nil {
			want = &end
			return
		}
		if end != *want {
			t.Fatalf("order %v ended %+v, another order ended %+v", idx, end, *want)
		}
	})
	if want.Status != domain.StatusFailed || want.Key.EventID != "e5" {
		t.Fatalf("end state %+v, want failed decided by e5", *want)
	}
	if n != 720 {
		t.Fatalf("ran %d permutations", n)
	}
}

func permute(n int, visit func([]int)) {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			visit(append([]int(nil), idx...))
			return
		}
		for i := k; i < n; i++ {
			idx[k], idx[i] = idx[i], idx[k]
			rec(k + 1)
			idx[k], idx[i] = idx[i], idx[k]
		}
	}
	rec(0)
}

func BenchmarkApplyFold(b *testing.B) {
	events := []domain.Event{
		ev("e3", domain.StatusDelivered, 2*time.Second, ""), ev("e1", domain.StatusAccepted, 0, ""),
		ev("e4", domain.StatusBounced, time.Minute, "hard"), ev("e2", domain.StatusDeferred, time.Second, ""),
	}
	b.ReportAllocs()
	for b.Loop() {
		var s precedence.State
		for _, e := range events {
			s = precedence.Apply(s, e).Next
		}
	}
}
