package testenv

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A wait that keeps moving is not cut off however long it takes in all: here 8 polls, well
// past a stall of a few polls.
func TestWaitGoesOnWhileProgressIsMade(t *testing.T) {
	t.Parallel()
	n := int64(0)
	start := time.Now()
	err := Wait("counting", 50*time.Millisecond, func() (int64, bool, error) {
		n++
		time.Sleep(5 * time.Millisecond)
		return n, n == 8, nil
	})
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("the wait took %s, shorter than the stall: the test proves nothing", took)
	}
}

// A wait whose progress stops fails once it has not moved for stall, and says how far it got
// and the last poll error.
func TestWaitFailsWhenProgressStalls(t *testing.T) {
	t.Parallel()
	calls := 0
	err := Wait("rows processed", 30*time.Millisecond, func() (int64, bool, error) {
		calls++
		if calls < 3 {
			return int64(calls), false, nil
		}
		return 2, false, errors.New("connection refused")
	})
	if err == nil {
		t.Fatal("Wait returned nil for a stalled wait")
	}
	for _, want := range []string{"rows processed", "no progress", "progress 2", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestWaitReturnsAtOnceWhenDone(t *testing.T) {
	t.Parallel()
	if err := Wait("done", time.Hour, func() (int64, bool, error) { return 0, true, nil }); err != nil {
		t.Fatal(err)
	}
}
