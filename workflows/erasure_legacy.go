package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/internal/erasure"
)

// ErasureRejectedRequestsChange is the workflow.GetVersion change id of the erasure's last step,
// rejected_requests (version 1, migration 00022). A run recorded before it ran the steps up to
// suppression_lifts and then finished: replayed, it must not take the new step. Remove this
// file, and the call, once no Erasure run recorded before 2026-12-06 can be replayed (their
// namespace retention has passed) and the recorded histories of that time are retired from
// testdata. See docs/operations/upgrades.md, "Changing workflow code".
const ErasureRejectedRequestsChange = "erasure-rejected-requests"

// erasurePhases are the phases this run takes: erasure.Plan's, without rejected_requests for a
// run recorded before that step existed.
func erasurePhases(ctx workflow.Context, scope string, force, dryRun bool) []erasure.Phase {
	phases := erasure.Plan(scope, force, dryRun)
	if workflow.GetVersion(ctx, ErasureRejectedRequestsChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		phases = slices.DeleteFunc(phases, func(p erasure.Phase) bool { return p.Table == "rejected_requests" })
	}
	return phases
}
