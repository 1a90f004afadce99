package retention_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/retention"
)

func TestInputCarriesWhatTheRunEnforces(t *testing.T) {
	const day = 24 * time.Hour
	period := func(d time.Duration) *config.Period { p := config.Period(d); return &p }
	r := config.DefaultRetention()
	in := retention.Input(r)
	assert.Equal(t, 30*day, in.Payloads)
	assert.Equal(t, 400*day, in.DedupeKeys)
	assert.Zero(t, in.InboundBodies, "unset: inbound bodies go with the payloads' partitions")

	r.InboundBodies = period(0)
	assert.Zero(t, retention.Input(r).InboundBodies, "0: removed as each event is processed, not by the run")

	r.InboundBodies = period(7 * day)
	assert.Equal(t, 7*day, retention.Input(r).InboundBodies)

	r.DedupeKeys = config.Forever
	assert.Zero(t, retention.Input(r).DedupeKeys, "forever: no prune cutoff")
}
