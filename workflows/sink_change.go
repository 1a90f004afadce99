//go:build !mailhook_unguarded_change

package workflows

import "go.temporal.io/sdk/workflow"

// beforeSinkSend is nothing in every build but the upgrade test's own (sink_change_unguarded.go).
func beforeSinkSend(workflow.Context, string) error { return nil }
