package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mailhook/mailhook/internal/domain"
)

func TestExpiredPartitionsEndedAtOrBeforeTheCutoff(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2025, 1, d, 0, 0, 0, 0, time.UTC) }
	parts := []domain.Partition{{Name: "a", From: day(1), To: day(2)}, {Name: "b", From: day(2), To: day(3)}, {Name: "c", From: day(3), To: day(4)}}
	assert.Equal(t, []domain.Partition{parts[0], parts[1]}, expired(parts, day(3)), "a range ending at the cutoff has expired")
	assert.Equal(t, []domain.Partition{parts[0], parts[1]}, expired(parts, day(3).Add(time.Hour)))
	assert.Equal(t, parts[:1], expired(parts, day(3).Add(-time.Nanosecond)), "one instant of its range is still kept")
	assert.Empty(t, expired(parts, day(2).Add(-time.Nanosecond)))
}
