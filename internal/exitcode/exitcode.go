// Package exitcode is the exit-code convention of mailhook's commands (mailhook and
// mailhook-loadtest), so scripts and orchestrators can tell a bad invocation or config, which no
// retry fixes, from a failure at run time: 0 ok, 1 failure, 2 bad usage or config. A command may
// add codes of its own above these (mailhook: 3, a reconciliation difference).
package exitcode

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

const (
	OK      = 0
	Failure = 1
	Usage   = 2
)

// usageError marks a bad command line or config.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// UsageError marks err as a bad command line or config: Of returns Usage for it, and for any
// error wrapping it.
func UsageError(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// IsUsage reports whether err is, or wraps, a UsageError.
func IsUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

// Of is the exit code of a command's error: OK for nil, Usage for a UsageError, else Failure.
func Of(err error) int {
	switch {
	case err == nil:
		return OK
	case IsUsage(err):
		return Usage
	}
	return Failure
}

// StrictUsage makes every flag error and argument error of root and the commands under it a
// UsageError, which cobra alone reports as plain errors (exit 1), and an unknown subcommand of a
// group (mailhook sinks lsit) one too, where cobra prints the group's help and exits 0. Call it
// once the tree is complete: it wraps the Args of the commands present then.
func StrictUsage(root *cobra.Command) {
	// Commands without a flag error func of their own inherit their parent's.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return UsageError(err) })
	wrapArgs(root)
}

// unknownSubcommand refuses any argument of a group: cobra reaches a group's Args only when no
// subcommand matched the first one.
func unknownSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's own default for the root's suggestions
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return errors.New(msg)
}

func wrapArgs(c *cobra.Command) {
	// A group (subcommands, no run of its own) would show its help for any argument, before its
	// Args are checked: give it a run that shows the help, so an argument is refused first.
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = unknownSubcommand
		c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	}
	if args := c.Args; args != nil {
		c.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return UsageError(err) // wrapping a UsageError again changes nothing
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}
