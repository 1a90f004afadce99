package erasure

import (
	"context"
	"errors"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/status"
)

// RunDeleter deletes Temporal runs by workflow ID, for an erasure: the runs of events that
// versions before 2026-12-02 keyed by the recipient's address hold it in their workflow ID, which
// no codec encrypts (store.WorkflowDeleter). Remove it with keys_legacy.go: once no namespace
// can still hold a run started by such a version (the namespace's retention after the last
// one stopped).
type RunDeleter struct {
	Client    client.Client
	Namespace string
}

// DeleteWorkflows deletes every run of each workflow ID (a redriven event has several; a run
// still open is terminated first, as Temporal does for a delete). An ID with no run left is no
// error, so a resumed erasure deletes again harmlessly. Errors name the ID by its position and
// the failure by its gRPC code only: the IDs hold the address, and Temporal's messages (an
// invalid query's, say) may repeat them.
func (d RunDeleter) DeleteWorkflows(ctx context.Context, ids []string) error {
	for i, id := range ids {
		runs, err := d.runs(ctx, id)
		if err != nil {
			return fmt.Errorf("list the runs of workflow %d of %d: %s", i+1, len(ids), status.Code(err))
		}
		for _, run := range runs {
			_, err := d.Client.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
				Namespace:         d.Namespace,
				WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: run},
			})
			var missing *serviceerror.NotFound
			if err != nil && !errors.As(err, &missing) {
				return fmt.Errorf("delete a run of workflow %d of %d: %s", i+1, len(ids), status.Code(err))
			}
		}
	}
	return nil
}

// runs lists the run ids of a workflow ID through visibility; "" (the latest run) when the ID
// cannot be written as a query literal, or visibility has none yet (a run just started).
func (d RunDeleter) runs(ctx context.Context, id string) ([]string, error) {
	if strings.ContainsAny(id, `'"\`) {
		return []string{""}, nil
	}
	var runs []string
	req := &workflowservice.ListWorkflowExecutionsRequest{Namespace: d.Namespace, Query: "WorkflowId = '" + id + "'"}
	for {
		resp, err := d.Client.ListWorkflow(ctx, req)
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			runs = append(runs, e.GetExecution().GetRunId())
		}
		if len(resp.GetNextPageToken()) == 0 {
			break
		}
		req.NextPageToken = resp.GetNextPageToken()
	}
	if len(runs) == 0 {
		runs = []string{""}
	}
	return runs, nil
}
