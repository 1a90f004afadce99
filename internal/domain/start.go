package domain

import (
	"fmt"
	"time"
)

// The contract between the edges that accept events (HTTP API, acceptance's handoff and relay,
// reconcile) and the workflows that process them: workflow type names, inputs and results, and
// the search attributes runs carry. The edges depend on this, never on workflows or
// activities, so a change to how an event is processed does not reach the code that accepts it.
// How a start can end is internal/start's (start.Starter).

// Workflow type names, as registered by the worker and started by the edges and the schedule.
const (
	// ProcessEventName processes one recorded event. ProcessWebhookEvent, the type before it,
	// stays registered so that its runs still open at an upgrade finish on the new workers.
	ProcessEventName = "ProcessEvent"
	// DailyReconcileName is the daily reconciliation, which the Temporal Schedule
	// mailhook-daily-reconcile starts at 00:30 UTC.
	DailyReconcileName = "DailyReconcile"
	// RetentionName enforces config retention.* (RetentionInput); the Temporal Schedule
	// mailhook-retention starts it at 01:15 UTC.
	RetentionName = "Retention"
	// SinkDeliveryName is a sink's drainer: one long-lived run per sink (SinkWorkflowID) that
	// owns the sink's circuit, probes it while it is open and sends its parked notifications.
	SinkDeliveryName = "SinkDelivery"
)

// The drainer's signal and query.
const (
	// SinkWakeSignal tells a drainer to look at its sink now: a notification was the first to
	// park for it, its circuit opened, an operator paused, resumed or redelivered. It carries
	// nothing: the sink's state is in PostgreSQL.
	SinkWakeSignal = "wake"
	// SinkStateQuery answers the drainer's last step (activities.SinkStep): state, parked
	// count, oldest parked, next probe, last error.
	SinkStateQuery = "state"
)

// The keyword search attributes every event's run carries, which an operator filters on in the
// Temporal UI (MessageID = "msg_…"). The worker registers them in the namespace when missing.
const (
	SearchAttributeProvider  = "Provider"
	SearchAttributeEventType = "EventType"
	SearchAttributeMessageID = "MessageID"
)

// SearchAttributeNames lists them.
var SearchAttributeNames = []string{SearchAttributeProvider, SearchAttributeEventType, SearchAttributeMessageID}

// DefaultTaskQueue is temporal.task_queue's default.
const DefaultTaskQueue = "mailhook"

// SinkWorkflowID is the workflow ID of a sink's drainer: sink:<name>, one per sink of the
// mailhook whose workers poll taskQueue. A task queue other than the default is part of it
// (sink:<name>@<task queue>): two mailhooks sharing a namespace (each its own task queue, its own
// database) may both name a sink "app", and each needs its own drainer.
func SinkWorkflowID(sink, taskQueue string) string {
	if taskQueue == DefaultTaskQueue {
		return "sink:" + sink
	}
	return "sink:" + sink + "@" + taskQueue
}

// SinkDeliveryInput is a drainer's input: the sink it drains.
type SinkDeliveryInput struct {
	Sink string `json:"sink"`
}

// EventRef is ProcessEvent's input: the event's key and the few small fields an operator reads in
// the Temporal UI, the routing decided when it was accepted, and the replay number. The event
// itself (payload, addresses, an inbound mail's body) stays in PostgreSQL, where it was stored
// before the workflow started; the steps read it from there. A 1 MiB inbound email and a
// 200-byte open cost the same history. Its JSON is part of every history: add fields, never
// rename or remove them.
type EventRef struct {
	Provider  string `json:"provider"`
	EventID   string `json:"event_id"`
	Type      string `json:"type"`
	Kind      Kind   `json:"kind"`
	MessageID string `json:"message_id,omitempty"`
	Routing
	// Replay, when positive, makes this run the operator's replay number n of a processed event
	// (workflow ID provider:event_id:replay:<n>): it runs every step again. Renotify keys its
	// notifications by event_id+":replay:"+n, so every sink that wants them gets them again.
	Replay   int  `json:"replay,omitempty"`
	Renotify bool `json:"renotify,omitempty"`
	// Accepted is set only on a run started while PostgreSQL could not take the event
	// (acceptance through Temporal): it is the event itself, which the run's first step stores
	// under its key. The later steps read the event from PostgreSQL as every run's do. The
	// payload codec, when configured, encrypts it with the rest of the input.
	Accepted *AcceptedEvent `json:"accepted,omitempty"`
}

// AcceptedEvent is an event accepted through Temporal: the verified event as parsed, its raw
// JSON in Event.Raw, and the id an earlier version of mailhook gave it (Event.PriorEventID,
// which Event's own JSON leaves out), so the stored row dedupes as an accepted one would.
type AcceptedEvent struct {
	Event        Event  `json:"event"`
	PriorEventID string `json:"prior_event_id,omitempty"`
}

// RefOf is the reference to a recorded event, routed by r.
func RefOf(ev Event, r Routing) EventRef {
	return EventRef{Provider: ev.Provider, EventID: ev.EventID, Type: ev.Type, Kind: ev.Kind, MessageID: ev.MessageID, Routing: r}
}

// Key is the event's durable key and workflow ID: provider:event_id.
func (r EventRef) Key() string { return r.Provider + ":" + r.EventID }

// NotificationEventID is the event id the run's notifications are keyed by (see Renotify).
func (r EventRef) NotificationEventID() string {
	if r.Replay > 0 && r.Renotify {
		return ReplayNotificationEventID(r.EventID, r.Replay)
	}
	return r.EventID
}

// ReplayNotificationEventID is the event id that replay n's notifications are keyed by when it
// renotifies: NotificationID(provider, ReplayNotificationEventID(id, n), sink, type).
func ReplayNotificationEventID(eventID string, n int) string {
	return fmt.Sprintf("%s:replay:%d", eventID, n)
}

// Result is what an event's run did; the Temporal UI shows it as the workflow result.
type Result struct {
	Transition
	Notifications []NotificationResult `json:"notifications,omitempty"`
}

// NotificationResult is one sink's outcome.
type NotificationResult struct {
	Sink   string `json:"sink"`
	Type   string `json:"type,omitempty"`
	ID     string `json:"id"`
	Status string `json:"status"` // sent, parked (for the sink's drainer) or failed
	// Reason says why it was parked (delivery.Reason*).
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// AlreadySent: the notification had been sent before this run (a replay without
	// --renotify, a reset run), so it was not sent again.
	AlreadySent bool `json:"already_sent,omitempty"`
}

// DailyReconcileInput is the schedule's argument. Routing is decided by whoever starts the run
// (the schedule, updated at every worker start).
type DailyReconcileInput struct {
	// Date (YYYY-MM-DD, UTC) to count; empty means the UTC day before the run was scheduled
	// (a backfilled run counts the day before its scheduled time), or, for a run started by
	// hand, before it started.
	Date string `json:"date,omitempty"`
	// RedriveOlderThan: zero means DefaultRedriveOlderThan.
	RedriveOlderThan time.Duration `json:"redrive_older_than,omitempty"`
	// ReportSinks want report.daily.
	ReportSinks []string `json:"report_sinks,omitempty"`
	// ProviderEndpoints are the endpoints with a reconcile block: the run compares their
	// providers' own counts of the day with what was received.
	ProviderEndpoints []string `json:"provider_endpoints,omitempty"`
	// BackfillEndpoints are those of ProviderEndpoints with reconcile.backfill: a day with a gap
	// is fetched back from the provider's API, then compared again.
	BackfillEndpoints []string `json:"backfill_endpoints,omitempty"`
}
