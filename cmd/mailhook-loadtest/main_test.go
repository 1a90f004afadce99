package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/exitcode"
)

// mailhook-loadtest has what `mailhook loadtest` had: the load test itself on the root, and
// keygen, suppression-check and baseline, each with its help ending in the exit codes.
func TestCommands(t *testing.T) {
	var names []string
	for _, c := range root().Commands() {
		names = append(names, c.Name())
	}
	slices.Sort(names)
	if want := []string{"baseline", "keygen", "receiver", "slow-bodies", "suppression-check"}; !slices.Equal(names, want) {
		t.Fatalf("subcommands %v, want %v", names, want)
	}
	for _, args := range [][]string{{}, {"baseline"}, {"keygen"}, {"receiver"}, {"slow-bodies"}, {"suppression-check"}} {
		var out strings.Builder
		c := root()
		c.SetArgs(append(args, "--help"))
		c.SetOut(&out)
		if err := c.Execute(); err != nil {
			t.Fatalf("%v --help: %v", args, err)
		}
		if !strings.Contains(out.String(), "Exit codes: 0 ok") {
			t.Errorf("%v --help does not list the exit codes", args)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{"no-such-command"}, {"--no-such-flag"}, {"baseline", "--concurrency", "many"}, {"suppression-check", "--rate", "x"}, {"receiver", "--mode", "refuse", "--secret", "whsec_eA=="}} {
		c := root()
		c.SetArgs(args)
		c.SetOut(io.Discard)
		c.SetErr(io.Discard)
		if code := exitcode.Of(c.Execute()); code != exitcode.Usage {
			t.Errorf("%v exits %d, want %d", args, code, exitcode.Usage)
		}
	}
}
