package baseline

import (
	"crypto/rand"
	"encoding/hex"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/activity"

	"github.com/mailhook/mailhook/internal/loadgen"
)

// Command is `mailhook-loadtest baseline`.
func Command() *cobra.Command {
	o := Options{}
	var cpu []string
	cmd := &cobra.Command{
		Use:   "baseline",
		Short: "Measure the Temporal ceiling: trivial workflows started straight through the SDK, with or without a worker",
		Long: `baseline starts trivial workflows with the same start options as mailhook (workflow ID, reuse
policy, search attributes, summary, input size) from --concurrency goroutines for --duration.
--mode start runs no worker while it measures (the start rate; the backlog is completed
afterwards, unmeasured). --mode complete runs a worker whose workflow has --activities trivial
activities in a row like ProcessWebhookEvent (RecordEvent, ApplyStatus, Notify, MarkProcessed),
and reports the completion rate; --local db makes every step but Notify a local activity,
--local all every step. Loopback Temporal only.`,
		Example: `  mailhook-loadtest baseline --temporal 127.0.0.1:17233 --mode start --concurrency 50 --duration 20s
  mailhook-loadtest baseline --temporal 127.0.0.1:17233 --mode complete --local db`,
		RunE: func(c *cobra.Command, _ []string) error {
			var err error
			if o.CPU, err = loadgen.ParseCPUTargets(cpu); err != nil {
				return err
			}
			o.Out = c.OutOrStdout()
			_, err = Run(c.Context(), o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Temporal, "temporal", "127.0.0.1:7233", "Temporal frontend host:port (loopback)")
	f.StringVar(&o.Namespace, "namespace", "default", "namespace")
	f.StringVar(&o.TaskQueue, "task-queue", "", "task queue (default: a fresh baseline-<random>)")
	f.StringVar(&o.Mode, "mode", ModeStart, "start (no worker: start rate) or complete (worker: completion rate)")
	f.IntVar(&o.Concurrency, "concurrency", 50, "concurrent starters")
	f.DurationVar(&o.Duration, "duration", 20*time.Second, "how long to start workflows")
	f.DurationVar(&o.Warmup, "warmup", 3*time.Second, "start of the run left out of rates and latencies")
	f.IntVar(&o.Activities, "activities", 4, "activities per workflow in --mode complete (ProcessWebhookEvent: 4 for a status change)")
	f.StringVar(&o.Local, "local", LocalNone, "which steps are local activities: none, db (all but Notify) or all")
	f.IntVar(&o.PayloadBytes, "payload-bytes", 700, "size of the pad in the workflow input (a mailhook Input is about this size)")
	f.BoolVar(&o.SearchAttributes, "search-attributes", true, "set Provider/EventType/MessageID and a summary, as mailhook does")
	f.DurationVar(&o.DrainTimeout, "drain-timeout", 5*time.Minute, "how long to wait for the started workflows to finish")
	f.StringArrayVar(&cpu, "cpu", nil, "label=pid[+pid…]: report the CPU those processes used (repeatable)")
	f.StringVar(&o.JSONPath, "json", "", "also write the report as JSON to this file")
	return cmd
}

func activityOptions(name string) activity.RegisterOptions {
	return activity.RegisterOptions{Name: name}
}

func randomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
