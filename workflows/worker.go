package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/schedule"
)

// NewWorker is a worker on cfg's task queue that runs every workflow with cfg's retry policies,
// and the activities, whose dependencies (store, sinks, client) the caller built.
func NewWorker(c client.Client, cfg config.Config, a *activities.Activities, r *activities.Reconcile, ret *activities.Retention,
	e *activities.Erasure) worker.Worker {
	wc := cfg.Worker
	w := worker.New(c, cfg.Temporal.TaskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize:      wc.MaxConcurrentActivities,
		MaxConcurrentLocalActivityExecutionSize: wc.MaxConcurrentLocalActivities,
		MaxConcurrentWorkflowTaskExecutionSize:  wc.MaxConcurrentWorkflowTasks,
		MaxConcurrentWorkflowTaskPollers:        wc.WorkflowTaskPollers,
		MaxConcurrentActivityTaskPollers:        wc.ActivityTaskPollers,
		// On SIGTERM running activities (a sink POST) get this long before they are cancelled.
		WorkerStopTimeout:        wc.StopTimeout,
		DeadlockDetectionTimeout: wc.DeadlockDetectionTimeout,
	})
	NewProcessor(cfg).Register(w)
	// Each set registers its activities under the names histories record; the workflows call
	// the methods, which the SDK maps to those names.
	a.Register(w)
	r.Register(w)
	ret.Register(w)
	e.Register(w)
	return w
}

// NewProcessor is the workflows' view of cfg: notify.* and acceptance.through_temporal.record_*.
func NewProcessor(cfg config.Config) *Processor {
	n, f := cfg.Notify, cfg.Acceptance.ThroughTemporal
	return &Processor{
		Notify: NotifyPolicy{InitialInterval: n.InitialInterval, MaxInterval: n.MaxInterval,
			GiveUpAfter: n.GiveUpAfter, AttemptTimeout: n.AttemptTimeout, Attempts: n.ParkAfter(),
			FirstProbe: n.FirstProbe(), LongestProbe: n.LongestProbe()},
		Record: RecordPolicy{InitialInterval: f.RecordInterval, MaxInterval: f.RecordMaxInterval},
	}
}

// Register registers the workflows under the type names histories record and the edges start.
func (p *Processor) Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(p.ProcessEvent, workflow.RegisterOptions{Name: domain.ProcessEventName})
	r.RegisterWorkflowWithOptions(p.SinkDelivery, workflow.RegisterOptions{Name: domain.SinkDeliveryName})
	// Still registered for the runs it started before ProcessEvent replaced it.
	r.RegisterWorkflowWithOptions(p.ProcessWebhookEvent, workflow.RegisterOptions{Name: ProcessWebhookEventName})
	r.RegisterWorkflowWithOptions(p.DailyReconcile, workflow.RegisterOptions{Name: domain.DailyReconcileName})
	r.RegisterWorkflowWithOptions(Retention, workflow.RegisterOptions{Name: domain.RetentionName})
	r.RegisterWorkflowWithOptions(Erasure, workflow.RegisterOptions{Name: domain.ErasureName})
}

// EnsureSearchAttributes registers the search attributes the edges start runs with in the
// namespace if they are missing. Where the operator API is not allowed (Temporal Cloud) it only
// warns: register them there with tcld or the Cloud UI.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string, log *slog.Logger) error {
	list, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	var added []string
	for _, n := range domain.SearchAttributeNames {
		if _, ok := list.GetCustomAttributes()[n]; ok {
			continue
		}
		// One attribute per call: the dev server (SQLite visibility, server 1.29) silently
		// registers only the first of several in one request.
		_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace:        namespace,
			SearchAttributes: map[string]enumspb.IndexedValueType{n: enumspb.INDEXED_VALUE_TYPE_KEYWORD},
		})
		var exists *serviceerror.AlreadyExists
		if err != nil && !errors.As(err, &exists) {
			return fmt.Errorf("add search attribute %s: %w", n, err)
		}
		added = append(added, n)
	}
	if len(added) > 0 {
		log.Info("registered search attributes", "namespace", namespace, "names", added)
	}
	return nil
}

// EnsureSchedules creates or updates the schedules that start DailyReconcile and Retention once
// the worker runs. A failure (a namespace that refuses schedules, Temporal busy) is logged, never
// fatal: events are still processed, and the next worker start tries again.
func EnsureSchedules(ctx context.Context, c client.Client, schedules []schedule.Daily, log *slog.Logger) {
	for _, d := range schedules {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := d.Ensure(sctx, c)
		cancel()
		if err != nil {
			log.Warn("could not ensure the "+d.Summary+" schedule", "schedule_id", d.ID, "error", err)
			continue
		}
		log.Info(d.Summary+" schedule ensured", "schedule_id", d.ID, "at", d.At())
	}
}
