package activities

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
)

// A notification Process wrote is taken once, by its first attempt, and only within
// PreparedMaxAge: later, the attempt reads its row and gate again.
func TestPreparedNotificationsAreTakenOnceWhileFresh(t *testing.T) {
	var p preparedNotifications
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	ev := domain.Event{Provider: "resend", EventID: "evt_1"}
	p.keep([]delivery.Notification{{ID: "n1"}, {ID: "n2"}}, ev, domain.ApplyResult{Version: 3}, now)

	x, ok := p.take("n1", now.Add(time.Millisecond))
	require.True(t, ok)
	assert.Equal(t, "evt_1", x.ev.EventID)
	assert.Equal(t, int64(3), x.apply.Version)
	_, ok = p.take("n1", now.Add(time.Millisecond))
	assert.False(t, ok, "taken once")
	_, ok = p.take("n2", now.Add(PreparedMaxAge+time.Millisecond))
	assert.False(t, ok, "too old: its gate is read again")
	_, ok = p.take("n3", now)
	assert.False(t, ok)
}

// Those no attempt took go once they are older than PreparedMaxAge, and the worker holds at
// most preparedLimit.
func TestPreparedNotificationsAreBounded(t *testing.T) {
	var p preparedNotifications
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	p.keep([]delivery.Notification{{ID: "old"}}, domain.Event{}, domain.ApplyResult{}, now)
	p.keep([]delivery.Notification{{ID: "new"}}, domain.Event{}, domain.ApplyResult{}, now.Add(PreparedMaxAge+time.Second))
	assert.Len(t, p.m, 1)
	_, ok := p.m["new"]
	assert.True(t, ok)

	many := make([]delivery.Notification, preparedLimit+10)
	for i := range many {
		many[i].ID = fmt.Sprintf("n%d", i)
	}
	p.keep(many, domain.Event{}, domain.ApplyResult{}, now.Add(PreparedMaxAge+time.Second))
	assert.Len(t, p.m, preparedLimit)
}
