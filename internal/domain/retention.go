package domain

import (
	"errors"
	"fmt"
	"time"
)

// RetentionInput is the Retention workflow's input: config retention.* as plain values, which
// the mailhook-retention schedule's action carries (brought up to date at every worker start),
// so a run's input in the Temporal UI says what it enforced. Its JSON is part of every
// history: add fields, never rename or remove them.
type RetentionInput struct {
	// Payloads: a payload partition whose whole range ended longer ago than this is dropped.
	Payloads time.Duration `json:"payloads"`
	// DedupeKeys: the keys of processed events received longer ago than this are deleted.
	// Zero keeps them forever.
	DedupeKeys time.Duration `json:"dedupe_keys,omitempty"`
	// DailyPartitions: new partitions cover one UTC day each; else one month.
	DailyPartitions bool `json:"daily_partitions,omitempty"`
	// PartitionsAhead: how many partitions past the current one are created in advance.
	PartitionsAhead int `json:"partitions_ahead"`
	// InboundBodies: the bodies of inbound emails processed longer ago than this (and all
	// notified) are removed. Zero: not by this run (retention.inbound_bodies unset keeps them
	// with the payloads; 0 removes them as the event is marked processed).
	InboundBodies time.Duration `json:"inbound_bodies,omitempty"`
}

// MinPayloadRetention is the shortest retention.payloads, as config validates it.
const MinPayloadRetention = 24 * time.Hour

// Validate refuses an input that would remove more than config could ask for: an input built
// by hand (a `temporal workflow start`) goes through it too.
func (in RetentionInput) Validate() error {
	switch {
	case in.Payloads < MinPayloadRetention:
		return fmt.Errorf("payloads %s: must be at least %s", in.Payloads, MinPayloadRetention)
	case in.DedupeKeys < 0, in.DedupeKeys > 0 && in.DedupeKeys < in.Payloads:
		return fmt.Errorf("dedupe_keys %s: must be 0 (forever) or at least payloads (%s)", in.DedupeKeys, in.Payloads)
	case in.InboundBodies < 0:
		return fmt.Errorf("inbound_bodies %s: must not be negative", in.InboundBodies)
	case in.PartitionsAhead < 1:
		return errors.New("partitions_ahead must be at least 1")
	}
	return nil
}

// Cutoffs are the instants before which a run at now removes payloads and dedupe keys; keys is
// zero when they are kept forever.
func (in RetentionInput) Cutoffs(now time.Time) (payloads, keys time.Time) {
	payloads = now.Add(-in.Payloads)
	if in.DedupeKeys > 0 {
		keys = now.Add(-in.DedupeKeys)
	}
	return payloads, keys
}
