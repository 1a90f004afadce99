package acceptance_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/acceptance"
)

// The start window opens at one start, doubles per round of answered starts up to its size,
// halves once per round of failures, then grows by one per round; a start answered after half
// the timeout does not grow it.
func TestStartWindowGrowsOnAnswersAndHalvesOnFailures(t *testing.T) {
	w := acceptance.NewWindow(32, time.Hour)
	round := func(answered bool) {
		t.Helper()
		slots := make([]acceptance.Slot, w.Limit())
		for i := range slots {
			s, ok := w.Acquire(context.Background())
			require.True(t, ok)
			slots[i] = s
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, ok := w.Acquire(ctx)
		require.False(t, ok, "a start beyond the window was let through")
		for _, s := range slots {
			s.Release(answered)
		}
	}
	var sizes []int
	for range 6 {
		round(true)
		sizes = append(sizes, w.Limit())
	}
	assert.Equal(t, []int{2, 4, 8, 16, 32, 32}, sizes, "opening")
	round(false)
	assert.Equal(t, 16, w.Limit(), "a round of failures halves it once")
	round(true)
	assert.Equal(t, 17, w.Limit(), "past the last failure it grows by one per round")

	slow := acceptance.NewWindow(8, 20*time.Millisecond)
	s, _ := slow.Acquire(context.Background())
	time.Sleep(15 * time.Millisecond)
	s.Release(true)
	assert.Equal(t, 1, slow.Limit(), "an answer after half the timeout grew the window")
}
