package exitcode

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/spf13/cobra"
)

func TestOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, OK},
		{errors.New("boom"), Failure},
		{UsageError(errors.New("bad flag")), Usage},
		{fmt.Errorf("context: %w", UsageError(errors.New("bad flag"))), Usage},
	} {
		if got := Of(c.err); got != c.want {
			t.Errorf("Of(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if UsageError(nil) != nil {
		t.Error("UsageError(nil) is not nil")
	}
}

// Flag and argument errors anywhere in the tree are usage errors; a failing run is not.
func TestStrictUsage(t *testing.T) {
	root := &cobra.Command{Use: "x", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
	var fail bool
	sub := &cobra.Command{Use: "sub", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error {
		if fail {
			return errors.New("run failed")
		}
		return nil
	}}
	sub.Flags().BoolVar(&fail, "fail", false, "")
	group := &cobra.Command{Use: "group"}
	group.AddCommand(&cobra.Command{Use: "list", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }})
	root.AddCommand(sub, group)
	root.SilenceErrors, root.SilenceUsage = true, true
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	StrictUsage(root)
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, OK},
		{[]string{"sub"}, OK},
		{[]string{"no-such-command"}, Usage},
		{[]string{"--no-such-flag"}, Usage},
		{[]string{"sub", "--no-such-flag"}, Usage},
		{[]string{"sub", "extra"}, Usage},
		{[]string{"sub", "--fail"}, Failure},
		{[]string{"group"}, OK}, // its help
		{[]string{"group", "list"}, OK},
		{[]string{"group", "lsit"}, Usage},
		{[]string{"group", "list", "extra"}, Usage},
	} {
		root.SetArgs(c.args)
		fail = false
		if got := Of(root.Execute()); got != c.want {
			t.Errorf("%v exits %d, want %d", c.args, got, c.want)
		}
	}
}
