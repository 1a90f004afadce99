package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/store"
)

// eraseCommand is `mailhook erase`: POST /v1/erasures from the command line, against the
// database and the Temporal of the config: it records the job and starts its Erasure workflow,
// which a worker (`mailhook serve`) runs, and waits for it.
func eraseCommand(load func() (config.Config, error)) *cobra.Command {
	var (
		address, reason, format, scope string
		force, dryRun                  bool
		workerWait                     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "erase",
		Short: "Erase an address and everything that names it (GDPR art. 17)",
		Long: `Removes or redacts the address everywhere mailhook stored it: inbound
emails from, to or mentioning it lose their payload and notification body, every other payload and
notification body has it replaced by [erased], messages and their history lose it as recipient
and in diagnostics and notes, its soft bounces are deleted, and its suppressions stay, kept under
a keyed hash (erasure.hash_key) that the suppression check still finds. It prints, per table, the
rows changed, and records the erasure (by its hash, never the address) in the erasures table.
Running it again finds nothing left. Temporal's histories are not changed: docs/operations/erasure.md,
"What Temporal may still hold", says what they may still hold, until the namespace's retention removes them.

An address that inbound emails were sent to (support@yourapp.example, a mailbox of yours) is
refused: erasing it would remove every customer's email to it. --dry-run shows what would change,
--scope inbound removes only the inbound emails, and --force erases it everywhere.

--address - reads the address from the first line of standard input, so that it stays out of the
shell's history and the process list.

The erasure runs as a Temporal workflow (erasure:<job id>) on a worker of the config's task queue:
the command starts it and waits, printing its progress on stderr. Without a worker it fails after
--worker-wait, and the job waits for the next worker; stopped (Ctrl-C), the command stops waiting,
not the erasure.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if format != "table" && format != "json" {
				return exitcode.UsageError(fmt.Errorf("--format %q: want table or json", format))
			}
			if address == "-" {
				line, err := bufio.NewReader(c.InOrStdin()).ReadString('\n')
				if err != nil && !errors.Is(err, io.EOF) {
					return fmt.Errorf("read the address from stdin: %w", err)
				}
				address = line
			}
			if strings.TrimSpace(address) == "" || strings.TrimSpace(reason) == "" {
				return exitcode.UsageError(errors.New("--address and --reason are required"))
			}
			cfg, err := load()
			if err != nil {
				return err
			}
			opts, err := serve.StoreOptions(cfg)
			if err != nil {
				return exitcode.UsageError(err) // only erasure.hash_key can be wrong
			}
			if !opts.ErasureHasher.Configured() {
				return exitcode.UsageError(fmt.Errorf("config: %w", store.ErrErasureNotConfigured))
			}
			tc, err := dialTemporal(c, cfg)
			if err != nil {
				return err
			}
			defer tc.Close()
			st, err := store.Open(c.Context(), cfg.Database.URL, opts)
			if err != nil {
				return err
			}
			defer st.Close()
			er := &serve.Erasures{Jobs: st.Erasures, Temporal: tc, TaskQueue: cfg.Temporal.TaskQueue}
			job, err := er.StartErasure(c.Context(), store.ErasureRequest{Address: address, ErasedBy: cliActor(), Reason: strings.TrimSpace(reason),
				Scope: scope, Force: force, DryRun: dryRun})
			var e store.Erasure
			if err == nil {
				fmt.Fprintf(c.ErrOrStderr(), "erasure job %d started as workflow %s\n", job.ID, domain.ErasureWorkflowID(job.ID, cfg.Temporal.TaskQueue))
				if err = er.WaitPickedUp(c.Context(), job.ID, workerWait); err == nil {
					stop := showProgress(c.Context(), st, job.ID, c.ErrOrStderr())
					e, err = er.WaitErasure(c.Context(), job.ID)
					stop()
				}
			}
			ae := store.AuditEntry{Action: store.AuditErasure,
				Params: map[string]any{"scope": scope, "force": force, "dry_run": dryRun}}
			if h := st.Audit.AddressHash(address); h != "" {
				ae.Params["address_hash"] = h
			}
			if job.ID != 0 {
				ae.Ref = "erasure_jobs:" + strconv.FormatInt(job.ID, 10)
			}
			if err == nil {
				ae.Detail = map[string]any{"erasure_id": e.ID, "total": e.Total, "counts": e.Counts}
			}
			auditCLI(c, st.Audit, ae, err)
			var shared *store.SharedAddressError
			switch {
			case errors.Is(err, store.ErrInvalidAddress):
				return exitcode.UsageError(fmt.Errorf("--address: %w", store.ErrInvalidAddress))
			case errors.Is(err, store.ErrInvalidErasureScope):
				return exitcode.UsageError(fmt.Errorf("--scope: %w", store.ErrInvalidErasureScope))
			case errors.As(err, &shared):
				return exitcode.UsageError(fmt.Errorf("nothing changed: %d inbound emails were sent to this address, a mailbox of yours, "+
					"and erasing it removes every one of them: --dry-run shows what would change, "+
					"--scope inbound removes only its inbound emails, --force erases it everywhere", shared.Would.InboundTo))
			case errors.Is(err, store.ErrOtherErasureRunning):
				return exitcode.UsageError(err)
			case errors.Is(err, context.Canceled):
				return fmt.Errorf("stopped waiting; the erasure goes on in the worker (job %d: mailhook erase again, or GET /v1/erasures/jobs/%d, "+
					"says how it ends): %w", job.ID, job.ID, err)
			}
			if err != nil {
				return err
			}
			return printErasure(c.OutOrStdout(), e, format)
		},
	}
	cmd.Flags().StringVar(&address, "address", "", `the address to erase ("-": read it from stdin)`)
	cmd.Flags().StringVar(&reason, "reason", "", "why (the request's date, a ticket); recorded with the address redacted")
	cmd.Flags().StringVar(&format, "format", "table", "table or json (the answer of POST /v1/erasures)")
	cmd.Flags().StringVar(&scope, "scope", store.ErasureScopeAll, "all, or inbound: only the inbound emails that mention it")
	cmd.Flags().BoolVar(&force, "force", false, "erase an address that inbound emails were sent to (a mailbox of yours)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would change, change nothing")
	cmd.Flags().DurationVar(&workerWait, "worker-wait", time.Minute, "how long to wait for a worker to take the erasure up before failing")
	return cmd
}

func printErasure(out io.Writer, e store.Erasure, format string) error {
	if format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(e)
	}
	if e.Total == 0 && !e.DryRun {
		_, err := fmt.Fprintf(out, "Nothing left to erase: %s\n(erasure %d recorded, by %s)\n", e.AddressHash, e.ID, e.ErasedBy)
		return err
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "TABLE\tROWS CHANGED")
	for _, table := range store.ErasureTables {
		fmt.Fprintf(w, "%s\t%d\n", table, e.Counts[table])
	}
	fmt.Fprintf(w, "total\t%d\n", e.Total)
	if err := w.Flush(); err != nil {
		return err
	}
	if e.DryRun {
		_, err := fmt.Fprintf(out, "Dry run (scope %s): nothing was changed; %d of the inbound emails were sent to the address.\n", e.Scope, e.InboundTo)
		return err
	}
	_, err := fmt.Fprintf(out, "Erased in %d ms (erasure %d, by %s, scope %s). Its suppressions are kept as %s\n", e.TookMS, e.ID, e.ErasedBy, e.Scope, e.AddressHash)
	return err
}

// progressEvery is how often a running erasure says where it is (tests shorten it).
var progressEvery = 5 * time.Second

// showProgress prints, every progressEvery while the job runs, which table it is at and what it
// has changed so far, on stderr (the answer stays alone on stdout). A job that ends sooner
// prints nothing. stop waits for the printer to end.
func showProgress(ctx context.Context, st *store.Store, id int64, w io.Writer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			job, err := st.Erasures.ErasureJob(ctx, id)
			if err != nil || job.Status != domain.ErasureRunning {
				continue
			}
			fmt.Fprintf(w, "erasing (job %d): at %s, %d of %d phases done, %d batches, %d rows changed so far\n",
				job.ID, job.Phase, job.PhasesDone, job.Phases, job.Batches, job.Total)
		}
	}()
	return func() { cancel(); <-done }
}
