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
	// Audit: the operators' audit trail's rows recorded longer ago than this are deleted
	// (retention.audit). Zero: not by this run (an input of a version before it).
	Audit time.Duration `json:"audit,omitempty"`
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
	case in.Audit < 0, in.Audit > 0 && in.Audit < 24*time.Hour:
		return fmt.Errorf("audit %s: must be 0 (not by this run) or at least 24h", in.Audit)
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

// DefaultLockTimeout bounds each wait of a retention DDL statement for a lock. Inserts never
// wait for these statements (see DropExpiredPartitions), but readers of a partition being
// finalized and dropped can, so no such wait may last long; one that times out is finished by
// a later attempt.
const DefaultLockTimeout = 5 * time.Second

// DefaultPruneBatch is how many keys one statement of PruneDedupeKeys deletes.
const DefaultPruneBatch = 5000

// DroppedPartition is a partition retention removed.
type DroppedPartition struct {
	Name string    `json:"name"`
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Bytes is its size on disk (table, indexes, TOAST) just before it was detached.
	Bytes int64 `json:"bytes"`
	// Finalized: an interrupted run had left its detach pending; this one finished it.
	Finalized bool `json:"finalized,omitempty"`
	// Leftover: it was already detached (a run stopped between detach and drop).
	Leftover bool `json:"leftover,omitempty"`
}

// KeptPartition is an expired partition retention kept, and why.
type KeptPartition struct {
	Name   string    `json:"name"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Reason string    `json:"reason"`
	// Unprocessed counts the events received in its range and not processed (Quarantined of
	// them are quarantined: GET /v1/quarantine).
	Unprocessed int64 `json:"unprocessed_events,omitempty"`
	Quarantined int64 `json:"quarantined_events,omitempty"`
	// PendingNotifications counts the notifications created in its range still being delivered.
	PendingNotifications int64 `json:"pending_notifications,omitempty"`
}

// PartitionReport is what DropExpiredPartitions did.
type PartitionReport struct {
	Dropped []DroppedPartition `json:"dropped,omitempty"`
	Kept    []KeptPartition    `json:"kept,omitempty"`
}

// DropOptions says what DropExpiredPartitions removes.
type DropOptions struct {
	// Before: a partition whose range ended at or before this is expired.
	Before time.Time
	// LockTimeout bounds each wait for a lock; zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// Progress, when set, is called with the report so far after every partition.
	Progress func(PartitionReport)
}

// PruneOptions says which dedupe keys PruneDedupeKeys deletes.
type PruneOptions struct {
	// Before: keys of processed events received before this go.
	Before time.Time
	// Batch is how many keys one statement deletes; zero means DefaultPruneBatch.
	Batch int
	// Progress, when set, is called with the report so far after every batch.
	Progress func(PruneReport)
}

// PruneReport counts what PruneDedupeKeys deleted.
type PruneReport struct {
	Keys               int64 `json:"keys"`
	Replays            int64 `json:"replays,omitempty"`
	Notifications      int64 `json:"notifications,omitempty"`
	NotificationBodies int64 `json:"notification_bodies,omitempty"`
	Payloads           int64 `json:"payloads,omitempty"`
	Batches            int64 `json:"batches"`
}

// Add adds o's counts to r.
func (r *PruneReport) Add(o PruneReport) {
	r.Keys += o.Keys
	r.Replays += o.Replays
	r.Notifications += o.Notifications
	r.NotificationBodies += o.NotificationBodies
	r.Payloads += o.Payloads
	r.Batches += o.Batches
}

// Partitioning says how large new partitions are and how far ahead they are created.
type Partitioning struct {
	Daily bool // else monthly
	Ahead int  // partitions after the current one
}

// Partition is one partition of a partitioned table.
type Partition struct {
	Table    string
	Name     string
	From, To time.Time // [From, To), UTC midnights
	// DetachPending: a DETACH ... CONCURRENTLY was interrupted; it must be finalized.
	DetachPending bool
}

// Why DropExpiredPartitions keeps an expired partition.
const (
	// KeptUnprocessed: an event_payloads partition holds the payload of an event received in its
	// range and not processed yet (waiting, failing, or quarantined): processing it, or a
	// redrive after a fix, reads that payload.
	KeptUnprocessed = "unprocessed events"
	// KeptPendingNotifications: a notification_bodies partition holds the body of a
	// notification still being delivered (pending, or parked for its sink's drainer): its
	// retries and its drain send those bytes under the same id.
	KeptPendingNotifications = "pending notifications"
)
