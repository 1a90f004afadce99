package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A loop stopped by its budget reports what it did; one stopped by the activity's cancellation,
// or by a failure, fails.
func TestOutOfTimeIsTheBudgetOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spent, stop := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer stop()
	failed := errors.New("prune: context deadline exceeded")
	assert.True(t, outOfTime(ctx, spent, failed))
	assert.False(t, outOfTime(ctx, spent, nil), "no error: it finished")

	open, stopOpen := context.WithDeadline(ctx, time.Now().Add(time.Hour))
	defer stopOpen()
	assert.False(t, outOfTime(ctx, open, failed), "a failure with time left")

	cancel()
	assert.False(t, outOfTime(ctx, spent, failed), "the activity itself was cancelled")
}
