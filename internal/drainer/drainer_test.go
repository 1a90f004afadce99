package drainer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// temporal is a Temporal that is down or up, and counts the wakes that got through.
type temporal struct {
	mu   sync.Mutex
	down bool
	woke map[string]int
}

func (f *temporal) Wake(_ context.Context, sink string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errors.New("temporal unavailable")
	}
	f.woke[sink]++
	return nil
}

func (f *temporal) set(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// Wakes that fail while Temporal is down are owed, and paid once it is back: one wake per sink,
// however many failed, then nothing more.
func TestRetryingPaysOwedWakesOncePerSink(t *testing.T) {
	t.Parallel()
	tc := &temporal{down: true, woke: map[string]int{}}
	r := &Retrying{Waker: tc, Every: 10 * time.Millisecond}
	for range 3 {
		require.Error(t, r.Wake(t.Context(), "app"))
	}
	require.Error(t, r.Wake(t.Context(), "bus"))
	assert.Equal(t, []string{"app", "bus"}, r.Owed())

	time.Sleep(50 * time.Millisecond) // several tries, all failing: still owed
	assert.Equal(t, []string{"app", "bus"}, r.Owed())

	tc.set(false)
	settled := func() bool { // nothing owed, and nothing retrying
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.owed) == 0 && !r.running
	}
	deadline := time.Now().Add(time.Minute)
	for !settled() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, settled(), "the owed wakes were not paid once Temporal answered (owed: %v)", r.Owed())
	tc.mu.Lock()
	assert.Equal(t, map[string]int{"app": 1, "bus": 1}, tc.woke)
	tc.mu.Unlock()

	require.NoError(t, r.Wake(t.Context(), "app"), "a wake that gets through owes nothing")
	assert.Empty(t, r.Owed())
}
