package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/mailhook/mailhook/internal/domain"
)

// Registered names of the Retention activities.
const (
	CreatePartitionsName      = "CreatePartitions"
	MoveLegacyPayloadsName    = "MoveLegacyPayloads"
	DropExpiredPartitionsName = "DropExpiredPartitions"
	PruneDedupeKeysName       = "PruneDedupeKeys"
	StripInboundBodiesName    = "StripInboundBodies"
	PruneAuditName            = "PruneAudit"
)

// PartitionReport is the store's, named here so that workflows need not import the store.
type PartitionReport = domain.PartitionReport

// RetentionStore is the part of the store the retention activities use.
type RetentionStore interface {
	EnsurePartitions(ctx context.Context, p domain.Partitioning, from, now time.Time) ([]domain.Partition, error)
	MoveLegacyPayloads(ctx context.Context, batch int, p domain.Partitioning) (int64, error)
	DropExpiredPartitions(ctx context.Context, o domain.DropOptions) (domain.PartitionReport, error)
	PruneDedupeKeys(ctx context.Context, o domain.PruneOptions) (domain.PruneReport, error)
	StripInboundBodies(ctx context.Context, processedBefore time.Time, batch int) (int64, error)
}

// Retention carries the dependencies of the Retention workflow's activities.
type Retention struct {
	Store RetentionStore
	// LockTimeout bounds each wait of a partition's detach or drop for a lock; zero means
	// domain.DefaultLockTimeout.
	LockTimeout time.Duration
	// Batch is how many rows one statement moves or deletes; zero means domain.DefaultPruneBatch.
	Batch int
	// Audit prunes the operators' audit trail (retention.audit); nil: PruneAudit fails.
	Audit AuditPruner
}

// AuditPruner deletes the audit trail's rows older than before, batch rows a statement.
type AuditPruner interface {
	PruneAudit(ctx context.Context, before time.Time, batch int) (int64, error)
}

// PruneAuditInput says which rows of the audit trail PruneAudit deletes: those before Before.
type PruneAuditInput struct {
	Before time.Time `json:"before"`
}

// PruneAuditResult is what PruneAudit did.
type PruneAuditResult struct {
	Deleted int64 `json:"deleted"`
	More    bool  `json:"more,omitempty"`
}

// PruneAudit deletes the audit trail's rows recorded before in.Before (retention.audit), until
// none is left or the activity's time is nearly up; it is idempotent.
func (r *Retention) PruneAudit(ctx context.Context, in PruneAuditInput) (PruneAuditResult, error) {
	if r.Audit == nil {
		return PruneAuditResult{}, errors.New("prune audit: this worker has no audit store")
	}
	n, more, err := untilDone(ctx, func(ctx context.Context) (int64, error) {
		return r.Audit.PruneAudit(ctx, in.Before, r.batch())
	})
	return PruneAuditResult{Deleted: n, More: more}, err
}

// PartitionsInput sizes the partitions the activities create.
type PartitionsInput struct {
	Daily bool `json:"daily,omitempty"`
	Ahead int  `json:"ahead"`
}

func (in PartitionsInput) partitioning() domain.Partitioning {
	return domain.Partitioning{Daily: in.Daily, Ahead: in.Ahead}
}

// CreatePartitions creates the partitions of now and in.Ahead periods after it that are
// missing, and returns their names.
func (r *Retention) CreatePartitions(ctx context.Context, in PartitionsInput) ([]string, error) {
	now := time.Now()
	created, err := r.Store.EnsurePartitions(ctx, in.partitioning(), now, now)
	names := make([]string, len(created))
	for i, p := range created {
		names[i] = p.Name
	}
	return names, err
}

// LegacyResult is what MoveLegacyPayloads did.
type LegacyResult struct {
	Moved int64 `json:"moved"`
	// More: the activity's time ran out first; the next run moves the rest.
	More bool `json:"more,omitempty"`
}

// MoveLegacyPayloads moves the payloads rows recorded before migration 00009 keep in
// webhook_events into event_payloads (store.MoveLegacyPayloads), until none is left or the
// activity's time is nearly up; it is idempotent, so a later run takes up where this one
// stopped.
func (r *Retention) MoveLegacyPayloads(ctx context.Context, in PartitionsInput) (LegacyResult, error) {
	moved, more, err := untilDone(ctx, func(ctx context.Context) (int64, error) {
		return r.Store.MoveLegacyPayloads(ctx, r.batch(), in.partitioning())
	})
	return LegacyResult{Moved: moved, More: more}, err
}

// untilDone runs a store loop that reports no progress of its own, heartbeating meanwhile,
// within the activity's budget; more says the budget ran out first (not an error: the next run
// goes on).
func untilDone(ctx context.Context, loop func(context.Context) (int64, error)) (n int64, more bool, err error) {
	stop := heartbeatEvery(ctx, 10*time.Second)
	defer stop()
	bctx, cancel := budget(ctx)
	defer cancel()
	n, err = loop(bctx)
	if outOfTime(ctx, bctx, err) {
		return n, true, nil
	}
	return n, false, err
}

// DropInput says which partitions DropExpiredPartitions removes: those whose range ended at or
// before Before.
type DropInput struct {
	Before time.Time `json:"before"`
}

// DropExpiredPartitions detaches and drops the expired partitions that are no longer needed
// and reports the ones it kept (store.DropExpiredPartitions). It heartbeats the partitions it
// dropped after each one, so a retry (after a lock timeout: the next attempt finalizes the
// detach it left pending) reports every partition this run dropped, not only its own.
func (r *Retention) DropExpiredPartitions(ctx context.Context, in DropInput) (domain.PartitionReport, error) {
	var earlier domain.PartitionReport
	if activity.HasHeartbeatDetails(ctx) {
		if err := activity.GetHeartbeatDetails(ctx, &earlier); err != nil {
			return domain.PartitionReport{}, fmt.Errorf("read the previous attempt's progress: %w", err)
		}
	}
	withEarlier := func(rep domain.PartitionReport) domain.PartitionReport {
		rep.Dropped = append(append([]domain.DroppedPartition(nil), earlier.Dropped...), rep.Dropped...)
		return rep
	}
	rep, err := r.Store.DropExpiredPartitions(ctx, domain.DropOptions{
		Before: in.Before, LockTimeout: r.LockTimeout,
		Progress: func(rep domain.PartitionReport) {
			activity.RecordHeartbeat(ctx, domain.PartitionReport{Dropped: withEarlier(rep).Dropped})
		},
	})
	return withEarlier(rep), err
}

// PruneInput says which dedupe keys PruneDedupeKeys deletes: those of processed events
// received before Before.
type PruneInput struct {
	Before time.Time `json:"before"`
}

// PruneResult is what PruneDedupeKeys did, over every attempt of the activity.
type PruneResult struct {
	domain.PruneReport
	// More: the activity's time ran out first; the next run deletes the rest.
	More bool `json:"more,omitempty"`
}

// PruneDedupeKeys deletes the expired keys of processed events with the rows that refer to
// them (store.PruneDedupeKeys), until none is left or the activity's time is nearly up. It
// heartbeats its counts after every batch, so a retry adds to them.
func (r *Retention) PruneDedupeKeys(ctx context.Context, in PruneInput) (PruneResult, error) {
	var earlier domain.PruneReport
	if activity.HasHeartbeatDetails(ctx) {
		if err := activity.GetHeartbeatDetails(ctx, &earlier); err != nil {
			return PruneResult{}, fmt.Errorf("read the previous attempt's progress: %w", err)
		}
	}
	withEarlier := func(rep domain.PruneReport) domain.PruneReport {
		rep.Add(earlier)
		return rep
	}
	bctx, cancel := budget(ctx)
	defer cancel()
	rep, err := r.Store.PruneDedupeKeys(bctx, domain.PruneOptions{
		Before: in.Before, Batch: r.Batch,
		Progress: func(rep domain.PruneReport) { activity.RecordHeartbeat(ctx, withEarlier(rep)) },
	})
	if outOfTime(ctx, bctx, err) {
		return PruneResult{PruneReport: withEarlier(rep), More: true}, nil
	}
	return PruneResult{PruneReport: withEarlier(rep)}, err
}

// StripInput says whose inbound bodies StripInboundBodies removes: events processed before
// Before.
type StripInput struct {
	Before time.Time `json:"before"`
}

// StripResult is what StripInboundBodies did.
type StripResult struct {
	Stripped int64 `json:"stripped"`
	// More: the activity's time ran out first; the next run strips the rest.
	More bool `json:"more,omitempty"`
}

// StripInboundBodies removes the email bodies of inbound events processed before in.Before and
// all notified (store.StripInboundBodies), until none is left or the activity's time is nearly
// up; it is idempotent.
func (r *Retention) StripInboundBodies(ctx context.Context, in StripInput) (StripResult, error) {
	n, more, err := untilDone(ctx, func(ctx context.Context) (int64, error) {
		return r.Store.StripInboundBodies(ctx, in.Before, r.batch())
	})
	return StripResult{Stripped: n, More: more}, err
}

func (r *Retention) batch() int {
	if r.Batch > 0 {
		return r.Batch
	}
	return domain.DefaultPruneBatch
}

// Register registers the retention activities under their stable names.
func (r *Retention) Register(reg worker.ActivityRegistry) {
	reg.RegisterActivityWithOptions(r.CreatePartitions, activity.RegisterOptions{Name: CreatePartitionsName})
	reg.RegisterActivityWithOptions(r.MoveLegacyPayloads, activity.RegisterOptions{Name: MoveLegacyPayloadsName})
	reg.RegisterActivityWithOptions(r.DropExpiredPartitions, activity.RegisterOptions{Name: DropExpiredPartitionsName})
	reg.RegisterActivityWithOptions(r.PruneDedupeKeys, activity.RegisterOptions{Name: PruneDedupeKeysName})
	reg.RegisterActivityWithOptions(r.StripInboundBodies, activity.RegisterOptions{Name: StripInboundBodiesName})
	reg.RegisterActivityWithOptions(r.PruneAudit, activity.RegisterOptions{Name: PruneAuditName})
}

// budgetMargin is the part of an activity's time a batched loop leaves itself to report what
// it did before the activity times out.
const budgetMargin = time.Minute

// budget is ctx ending budgetMargin before the activity's deadline (or at once, if less is
// left), so a long loop stops in time to return its progress as a result.
func budget(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := activity.GetInfo(ctx).Deadline
	if deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline.Add(-budgetMargin))
}

// outOfTime reports whether err is the budget running out, rather than a failure or the
// activity being cancelled.
func outOfTime(ctx, budgeted context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && errors.Is(budgeted.Err(), context.DeadlineExceeded)
}

// heartbeatEvery heartbeats every period until the returned function is called, for a call
// that reports no progress of its own: the worker is alive, and a cancellation is delivered.
func heartbeatEvery(ctx context.Context, period time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { cancel(); <-done }
}
