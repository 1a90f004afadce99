package main

import (
	"log/slog"
	"strings"
	"testing"
)

// The reconciliation commands refuse bad arguments before connecting to anything.
func TestReconcileCommandsRefuseBadArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--event-id", "evt_1"}, "--provider and --event-id are required"},
		{[]string{"replay", "--provider", "postscale"}, "--provider and --event-id are required"},
		{[]string{"redrive", "--older-than", "0s"}, "--older-than must be positive"},
		{[]string{"redrive", "--limit", "5000"}, "--limit must be between 1 and 1000"},
		{[]string{"report", "daily", "extra"}, "unknown command"},
		{[]string{"report", "daily", "--expected", "x.csv"}, "--expected needs --provider"},
		{[]string{"report", "daily", "--date", "yesterday"}, "YYYY-MM-DD"},
		{[]string{"report", "daily", "--format", "xml"}, "unknown --format"},
	} {
		cmd := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
		cmd.SetArgs(c.args)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
		if code := exitCode(err); code != exitUsage {
			t.Errorf("%v exits %d, want %d (usage)", c.args, code, exitUsage)
		}
	}
}
