// Command mailhook-loadtest drives a running mailhook with signed webhooks and checks the result,
// and measures the Temporal ceiling mailhook runs under (docs/BENCHMARKS.md). It is a binary of
// its own so that the server binary, mailhook, does not carry the load generator.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/loadgen"
	"github.com/mailhook/mailhook/internal/loadgen/baseline"
)

func main() {
	// The reports go to stdout; anything logged goes to stderr as JSON, as mailhook's own logs do.
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, nil)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "mailhook-loadtest:", err)
		os.Exit(exitcode.Of(err))
	}
}

// exitCodes ends every command's help. mailhook-loadtest reads no mailhook config, so it has
// no environment section beyond the $VARs its flags name.
const exitCodes = `

Exit codes: 0 ok, 1 failure at run time or a failed check, 2 bad usage.`

// root is the load test itself (loadgen.Command: the default run, keygen and
// suppression-check) with baseline added.
func root() *cobra.Command {
	cmd := loadgen.Command()
	cmd.AddCommand(baseline.Command())
	cmd.SilenceUsage = true  // a failed check is not a usage problem
	cmd.SilenceErrors = true // main prints the error, once
	// An unknown subcommand is a usage error (exit 2), not a load test with a stray argument.
	cmd.Args = cobra.NoArgs
	exitcode.StrictUsage(cmd)
	for _, c := range append([]*cobra.Command{cmd}, cmd.Commands()...) {
		if c.Long == "" {
			c.Long = c.Short + "."
		}
		c.Long += exitCodes
	}
	return cmd
}
