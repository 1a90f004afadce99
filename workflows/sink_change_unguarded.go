//go:build mailhook_unguarded_change

package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
)

// beforeSinkSend, in a build with -tags mailhook_unguarded_change only, is a workflow change
// made without workflow.GetVersion: the drainer looks at its sink as a regular activity before
// each probe or drain step. A drainer recorded by a build without it, replayed by this one,
// finds SendProbe where this code schedules CheckSink: a non-determinism error (TMPRL1100).
// TestRollingUpgradeWithRunsInFlight builds mailhook with the tag to show that the upgrade
// test fails on such a change; never build a release with it.
func beforeSinkSend(ctx workflow.Context, sink string) error {
	var a *activities.Activities
	opts := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	return workflow.ExecuteActivity(opts, a.CheckSink, sink).Get(ctx, nil)
}
