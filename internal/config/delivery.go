package config

import (
	"fmt"
	"math"
	"time"
)

// Defaults of per-sink delivery (notify.*): what a zero value means, so a config written before
// these keys, or one a test builds field by field, gets them.
const (
	DefaultAttempts         = 4
	DefaultCircuitFailures  = 5
	DefaultProbeInterval    = 5 * time.Second
	DefaultMaxProbeInterval = time.Minute
	DefaultDrainBatch       = 100
	DefaultDrainConcurrency = 4
	DefaultPublishBatch     = 5000
)

// ParkAfter is notify.attempts, or its default.
func (n Notify) ParkAfter() int { return orInt(n.Attempts, DefaultAttempts) }

// OpenAfter is notify.circuit_failures, or its default.
func (n Notify) OpenAfter() int { return orInt(n.CircuitFailures, DefaultCircuitFailures) }

// FirstProbe is notify.probe_interval, or its default.
func (n Notify) FirstProbe() time.Duration { return orDuration(n.ProbeInterval, DefaultProbeInterval) }

// LongestProbe is notify.max_probe_interval, or its default (never shorter than FirstProbe).
func (n Notify) LongestProbe() time.Duration {
	return max(orDuration(n.MaxProbeInterval, DefaultMaxProbeInterval), n.FirstProbe())
}

// Batch is notify.drain_batch, or its default.
func (n Notify) Batch() int { return orInt(n.DrainBatch, DefaultDrainBatch) }

// PublishBatch is notify.publish_batch, or its default.
func (n Notify) PublishBatch() int { return orInt(n.PublishBatchSize, DefaultPublishBatch) }

// DrainWidth is how many requests a drain sends to s at once: its concurrency, or
// notify.drain_concurrency.
func (n Notify) DrainWidth(s Sink) int {
	if s.Concurrency > 0 {
		return s.Concurrency
	}
	return orInt(n.DrainConcurrency, DefaultDrainConcurrency)
}

func (n Notify) validateDelivery() error {
	for _, k := range []struct {
		key string
		v   int
	}{{"attempts", n.Attempts}, {"circuit_failures", n.CircuitFailures}, {"drain_batch", n.DrainBatch}, {"drain_concurrency", n.DrainConcurrency}, {"publish_batch", n.PublishBatchSize}} {
		if k.v < 0 {
			return fmt.Errorf("config: notify.%s must not be negative (0: the default)", k.key)
		}
	}
	if n.ProbeInterval < 0 || n.MaxProbeInterval < 0 {
		return fmt.Errorf("config: notify.probe_interval and max_probe_interval must not be negative (0: the default)")
	}
	if n.DrainBatch > 10000 {
		return fmt.Errorf("config: notify.drain_batch %d is over 10000: one drain step would hold its sink for too long", n.DrainBatch)
	}
	return nil
}

func (s Sink) validateLimits(key string) error {
	if s.Rate < 0 || math.IsNaN(s.Rate) || math.IsInf(s.Rate, 0) {
		return fmt.Errorf("config: %s.rate (sink %q) must be a number of requests a second, 0 or more (0: no bound)", key, s.Name)
	}
	if s.Concurrency < 0 || s.Concurrency > 10000 {
		return fmt.Errorf("config: %s.concurrency (sink %q) must be between 0 (no bound) and 10000", key, s.Name)
	}
	return nil
}

func orInt(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func orDuration(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}
