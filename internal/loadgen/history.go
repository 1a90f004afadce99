package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
)

// PerEvent is the Temporal work per accepted event: what a Temporal cluster's load and Temporal
// Cloud's bill scale with, whatever the machine. The calls come from mailhook's own counters
// (the serve process's /metrics: its starts and, when it runs the worker, its task
// completions); the history figures from a random sample of the run's workflows.
type PerEvent struct {
	Starts        float64 `json:"starts"`
	WorkflowTasks float64 `json:"workflow_tasks"`
	ActivityTasks float64 `json:"activity_tasks"`

	HistorySampled      int     `json:"history_sampled,omitempty"`
	HistoryBytes        float64 `json:"history_bytes,omitempty"` // mean protobuf size of a run's events
	HistoryBytesMax     int     `json:"history_bytes_max,omitempty"`
	HistoryEvents       float64 `json:"history_events,omitempty"` // mean events per run
	HistoryWFTasks      float64 `json:"history_workflow_tasks,omitempty"`
	HistoryActivityTask float64 `json:"history_activity_tasks,omitempty"`
	HistoryError        string  `json:"history_error,omitempty"`
}

// perEventCalls divides the run's Temporal calls by the accepted events.
func perEventCalls(ops map[string]float64, accepted int) *PerEvent {
	if accepted == 0 || ops == nil {
		return nil
	}
	n := float64(accepted)
	return &PerEvent{Starts: ops["StartWorkflowExecution"] / n, WorkflowTasks: ops["RespondWorkflowTaskCompleted"] / n,
		ActivityTasks: ops["RespondActivityTaskCompleted"] / n}
}

// sampleHistories reads the histories of up to n of the workflows (random, seeded) and fills the
// history figures of pe.
func sampleHistories(ctx context.Context, address, namespace string, workflowIDs []string, n int, seed int64, pe *PerEvent) {
	if len(workflowIDs) == 0 {
		return
	}
	c, err := client.Dial(client.Options{HostPort: address, Namespace: namespace, Logger: quietSDKLogger{}})
	if err != nil {
		pe.HistoryError = fmt.Sprintf("dial %s: %v", address, err)
		return
	}
	defer c.Close()
	ids := append([]string(nil), workflowIDs...)
	r := rand.New(rand.NewPCG(uint64(seed), 13))
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	ids = ids[:min(n, len(ids))]
	var bytes, events, wfts, acts int
	for _, id := range ids {
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		size := 0
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				pe.HistoryError = fmt.Sprintf("history of %s: %v", id, err)
				return
			}
			size += proto.Size(ev)
			events++
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				wfts++
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				acts++
			}
		}
		bytes += size
		pe.HistoryBytesMax = max(pe.HistoryBytesMax, size)
	}
	k := float64(len(ids))
	pe.HistorySampled = len(ids)
	pe.HistoryBytes, pe.HistoryEvents = float64(bytes)/k, float64(events)/k
	pe.HistoryWFTasks, pe.HistoryActivityTask = float64(wfts)/k, float64(acts)/k
}

// quietSDKLogger drops the SDK's own log lines: the report says what matters.
type quietSDKLogger struct{}

func (quietSDKLogger) Debug(string, ...any) {}
func (quietSDKLogger) Info(string, ...any)  {}
func (quietSDKLogger) Warn(string, ...any)  {}
func (quietSDKLogger) Error(string, ...any) {}

// acceptedThroughTemporal reports which of the workflows were started with their event in the
// input (mailhook's acceptance through Temporal while PostgreSQL was down): their start's input
// holds the "accepted" field. Without a payload codec only; an encrypted input reads as not.
func acceptedThroughTemporal(ctx context.Context, address, namespace string, workflowIDs []string) (map[string]bool, error) {
	out := map[string]bool{}
	if address == "" {
		return out, errors.New("no --temporal-address")
	}
	c, err := client.Dial(client.Options{HostPort: address, Namespace: namespace, Logger: quietSDKLogger{}})
	if err != nil {
		return out, fmt.Errorf("dial %s: %w", address, err)
	}
	defer c.Close()
	for _, id := range workflowIDs {
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		if !it.HasNext() {
			continue
		}
		ev, err := it.Next()
		if err != nil {
			return out, fmt.Errorf("history of %s: %w", id, err)
		}
		for _, p := range ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads() {
			var in struct {
				Accepted json.RawMessage `json:"accepted"`
			}
			if json.Unmarshal(p.GetData(), &in) == nil && len(in.Accepted) > 0 {
				out[id] = true
			}
		}
	}
	return out, nil
}
