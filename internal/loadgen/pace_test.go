package loadgen

import (
	"context"
	"testing"
	"time"
)

// The schedule, by counts: every send whose time is before end is made once, in order, at
// start + i/rate; a run that fell behind (every time below is past) makes them all at once
// rather than dropping or slipping them; each returning false, or ctx ending, stops it.
func TestPaceMakesEverySendOfTheSchedule(t *testing.T) {
	start := time.Now().Add(-time.Hour) // every time of the schedule has passed
	var got []int
	pace(t.Context(), start, start.Add(time.Second), 100, func(i int, at time.Time) bool {
		if want := start.Add(time.Duration(i) * 10 * time.Millisecond); !at.Equal(want) {
			t.Errorf("send %d at %s, want %s", i, at.Sub(start), want.Sub(start))
		}
		got = append(got, i)
		return true
	})
	if len(got) != 100 || got[0] != 0 || got[99] != 99 {
		t.Fatalf("a second at 100/s made %d sends (%v…), want 0 to 99", len(got), got[:min(len(got), 3)])
	}

	n := 0
	pace(t.Context(), start, start.Add(time.Second), 100, func(i int, _ time.Time) bool {
		n++
		return i < 9
	})
	if n != 10 {
		t.Errorf("each returned false at send 9: %d sends, want 10", n)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	n = 0
	pace(ctx, start, start.Add(time.Second), 100, func(int, time.Time) bool { n++; return true })
	if n != 0 {
		t.Errorf("%d sends after ctx ended, want none", n)
	}
	pace(t.Context(), start, start, 100, func(int, time.Time) bool { n++; return true })
	if n != 0 {
		t.Errorf("%d sends in an empty window, want none", n)
	}
}

// A send due later waits for its time; ctx ending meanwhile stops the loop without it.
func TestPaceStopsWaitingWhenCtxEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	start := time.Now()
	n := 0
	pace(ctx, start, start.Add(time.Hour), 1.0/3600, func(int, time.Time) bool {
		n++
		cancel() // the next send is due in an hour
		return true
	})
	if n != 1 {
		t.Errorf("%d sends, want the first only", n)
	}
}
