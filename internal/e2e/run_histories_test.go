package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// typeHistories is what Temporal's visibility holds of the runs of one workflow type: the
// history each closed run left, which a cluster's storage and Temporal Cloud's bill scale with.
type typeHistories struct {
	open          int
	bytes, events []int64
	max           int64
	largest       string // workflow ID of the largest history: a key, never an address
}

// listHistories reads every run's visibility record, by workflow type. Visibility's
// history_size_bytes is the size of the history as the server stored it, recorded when a run
// closes; a run still open has none yet and is only counted.
func listHistories(ctx context.Context, c client.Client) (map[string]*typeHistories, error) {
	out := map[string]*typeHistories{}
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", PageSize: 1000, NextPageToken: token})
		if err != nil {
			return out, fmt.Errorf("list workflows: %w", err)
		}
		for _, info := range resp.GetExecutions() {
			h := out[info.GetType().GetName()]
			if h == nil {
				h = &typeHistories{}
				out[info.GetType().GetName()] = h
			}
			if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				h.open++
				continue
			}
			if size := info.GetHistorySizeBytes(); len(h.bytes) == 0 || size > h.max {
				h.max, h.largest = size, info.GetExecution().GetWorkflowId()
			}
			h.bytes = append(h.bytes, info.GetHistorySizeBytes())
			h.events = append(h.events, info.GetHistoryLength())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// summary is one line: closed runs, their mean, median, 99th percentile and largest history in
// bytes, and their mean number of events.
func (h *typeHistories) summary() string {
	if len(h.bytes) == 0 {
		return fmt.Sprintf("%d open, none closed", h.open)
	}
	b := slices.Clone(h.bytes)
	slices.Sort(b)
	at := func(q float64) int64 { return b[min(len(b)-1, int(q*float64(len(b))))] }
	mean := func(v []int64) float64 {
		var sum int64
		for _, x := range v {
			sum += x
		}
		return float64(sum) / float64(len(v))
	}
	return fmt.Sprintf("%d closed (%d open): history bytes mean %.0f, median %d, p99 %d, largest %d (%s); events mean %.1f",
		len(b), h.open, mean(b), at(0.5), at(0.99), b[len(b)-1], h.largest, mean(h.events))
}

// reportHistories logs the history per run of every workflow type the run started (issue 40:
// a fault that grows histories shows here, where the counts of tasks do not say how large).
// Called after the drain, so every event's run has closed; a run's visibility record is written
// just after it closes, so a few may still read as open.
func (e *procEnv) reportHistories() {
	t := e.t
	c, done, err := e.temporalClient()
	if err != nil {
		t.Logf("histories: %v", err)
		return
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	byType, err := listHistories(ctx, c)
	if err != nil {
		t.Logf("histories: %v", err)
		return
	}
	var lines []string
	for _, typ := range slices.Sorted(maps.Keys(byType)) {
		lines = append(lines, fmt.Sprintf("  %-22s %s", typ, byType[typ].summary()))
	}
	t.Logf("history per run, from Temporal's visibility:\n%s", strings.Join(lines, "\n"))
}
