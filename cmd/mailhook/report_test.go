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

// backfill refuses bad arguments before connecting to anything.
func TestBackfillRefusesBadArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backfill", "--since", "2026-11-01", "--until", "2026-11-02"}, "--endpoint, --since and --until are required"},
		{[]string{"backfill", "--endpoint", "mailgun", "--since", "2026-11-01"}, "--endpoint, --since and --until are required"},
		{[]string{"backfill", "--endpoint", "mailgun", "--since", "yesterday", "--until", "2026-11-02"}, "neither RFC 3339"},
		{[]string{"backfill", "--endpoint", "mailgun", "--since", "2026-11-02", "--until", "2026-11-01T00:00:00Z"}, "--since must be before --until"},
		{[]string{"backfill", "--endpoint", "mailgun", "--since", "2026-11-01", "--until", "2999-01-01"}, "in the future"},
		{[]string{"backfill", "--endpoint", "nope", "--since", "2026-11-01", "--until", "2026-11-02"}, `no endpoint "nope"`},
		{[]string{"backfill", "--endpoint", "postscale", "--since", "2026-11-01", "--until", "2026-11-02"}, "no reconcile block"},
	} {
		cmd := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
		cmd.SetArgs(append(c.args, "--config", ""))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
		if code := exitCode(err); code != exitUsage {
			t.Errorf("%v exits %d, want %d (usage)", c.args, code, exitUsage)
		}
	}
}
