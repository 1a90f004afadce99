package loadgen

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Report is everything one load test measured and checked; --json writes it.
type Report struct {
	RunID        string         `json:"run_id"`
	Options      map[string]any `json:"options"`
	LoadAvgStart string         `json:"loadavg_start"`
	LoadAvgEnd   string         `json:"loadavg_send_end"`

	WindowSeconds float64            `json:"window_seconds"` // measured part of the send phase
	Codes         map[string]int     `json:"codes"`          // every answer, warm-up included
	RequestKinds  map[string]int     `json:"request_kinds"`  // original, dup-later, dup-concurrent
	Latency       map[string]Summary `json:"latency"`        // provider/outcome → accept latency
	// ServerLatency: means from mailhook's /metrics over the window (handler, SDK start call).
	ServerLatency  map[string]time.Duration `json:"server_latency_mean_ns,omitempty"`
	RequestsPerSec float64                  `json:"requests_per_sec"`
	Skipped        int                      `json:"skipped"` // open loop: requests not sent (MaxInflight)
	GaveUp         int                      `json:"gave_up"` // requests never answered 200

	EventsDistinctSent     int `json:"events_distinct_sent"`
	EventsAccepted         int `json:"events_accepted"`
	EventsNotAccepted      int `json:"events_not_accepted"`
	eventsAcceptedInWindow int
	EventsAcceptedPerSec   float64 `json:"events_accepted_per_sec"` // new events first answered 200 in the window
	BatchAccepted          int     `json:"batch_accepted"`
	BatchDuplicate         int     `json:"batch_duplicate"`
	BatchEvents            int     `json:"batch_events"`
	EventSends             int     `json:"event_sends"` // events carried by answered requests (dups included)

	Messages                  int `json:"messages"`
	MessagesShuffled          int `json:"messages_shuffled"`
	MessagesArrivedOutOfOrder int `json:"messages_arrived_out_of_order"`
	MessagesChecked           int `json:"messages_checked"`

	DrainSeconds              float64        `json:"drain_seconds"`
	EventsRecorded            int            `json:"events_recorded"`
	EventsProcessed           int            `json:"events_processed"`
	ProcessedPerSecInWindow   float64        `json:"processed_per_sec_in_window"`
	ProcessedPerSecOverall    float64        `json:"processed_per_sec_overall"` // processed / (last processed_at − start)
	LastProcessedAfterSendEnd float64        `json:"last_processed_after_send_end_seconds"`
	EndToEnd                  Summary        `json:"end_to_end"` // first 200 → processed_at
	ExpectedStatuses          map[string]int `json:"expected_statuses"`

	Notifications NotificationStats `json:"notifications"`
	Sink          SinkStats         `json:"sink"`
	// NotificationLatency: the sink's first receipt of each notification − the first send of
	// its event's webhook.
	NotificationLatency *NotificationLatency `json:"notification_latency,omitempty"`

	TemporalOps        map[string]float64 `json:"temporal_ops,omitempty"`
	StartsPerEventSend float64            `json:"starts_per_event_send"`
	PerEvent           *PerEvent          `json:"per_event,omitempty"`
	PG                 *PGStats           `json:"pg,omitempty"`
	// DupProbe is the probe with DupProbeConcurrency senders; DupProbeSequential one at a time.
	DupProbe           *ProbeReport `json:"dup_probe,omitempty"`
	DupProbeSequential *ProbeReport `json:"dup_probe_sequential,omitempty"`

	CPUCores      map[string]float64 `json:"cpu_cores_window"`
	CPUCoresDrain map[string]float64 `json:"cpu_cores_drain"`
	// CPUSecondsRun is the CPU time each target used from before the first request until every
	// accepted event was processed (the drain's end): divided by the events, the CPU an event
	// costs, which a loaded machine moves less than it moves rates.
	CPUSecondsRun map[string]float64 `json:"cpu_seconds_run"`
	// CPUSecondsWindow is the CPU time each target used over the measured window (warm-up to
	// the send phase's end): with --events and no warm-up, what a fixed number of accepted events
	// cost, exact to a clock tick per process (CPUCores is the same over the window's seconds).
	CPUSecondsWindow     map[string]float64 `json:"cpu_seconds_window"`
	MailhookRSSAtSendEnd *Memory            `json:"mailhook_memory_send_end,omitempty"`
	// Flood: the badly signed requests sent beside the valid traffic (--flood-rate).
	Flood          *FloodReport `json:"flood,omitempty"`
	MailhookMemory *Memory      `json:"mailhook_memory,omitempty"`

	Notes   []string `json:"notes,omitempty"`
	Verdict []Check  `json:"verdict"`
	Passed  bool     `json:"passed"`
}

// NotificationStats compares mailhook's notification rows with what the sink received.
type NotificationStats struct {
	Expected         int            `json:"expected"` // rows for this run's events and the sink
	ByType           map[string]int `json:"by_type"`
	DistinctReceived int            `json:"distinct_received"`
	Deliveries       int            `json:"deliveries"`   // HTTP requests (repeats of an id included)
	RepeatedIDs      int            `json:"repeated_ids"` // ids delivered more than once
	Foreign          int            `json:"foreign"`      // ids of other runs' events
}

// Memory is a process's resident set.
type Memory struct {
	PeakRSSBytes int64  `json:"peak_rss_bytes"` // VmHWM
	RSSBytes     int64  `json:"rss_bytes"`      // VmRSS
	Error        string `json:"error,omitempty"`
}

// ProbeReport is the idle duplicate probe.
type ProbeReport struct {
	Requests                int                      `json:"requests"`
	Concurrency             int                      `json:"concurrency"`
	Seconds                 float64                  `json:"seconds"`
	LoadAvg                 string                   `json:"loadavg"`
	Latency                 Summary                  `json:"latency"`
	Codes                   map[string]int           `json:"codes"`
	TemporalOps             map[string]float64       `json:"temporal_ops,omitempty"`
	ServerLatency           map[string]time.Duration `json:"server_latency_mean_ns,omitempty"`
	StartsPerDuplicate      float64                  `json:"starts_per_duplicate"`
	ClientCallsPerDuplicate float64                  `json:"client_calls_per_duplicate"`
	Error                   string                   `json:"error,omitempty"`
}

func (o *Options) summary() map[string]any {
	m := map[string]any{
		"url": o.URL, "weights": o.Weights, "duration": o.Duration.String(), "warmup": o.Warmup.String(),
		"dup_share": o.DupShare, "dup_concurrent": o.DupConcurrent, "out_of_order": o.OutOfOrder,
		"max_batch": o.MaxBatch, "seed": o.Seed, "max_retries": o.MaxRetries, "dup_probe": o.DupProbe,
	}
	if o.Rate > 0 {
		m["rate"] = o.Rate
		m["max_inflight"] = o.MaxInflight
	} else {
		m["concurrency"] = o.Concurrency
	}
	return m
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

func (r *Report) print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("== requests (window %.1fs after warm-up; load average %s at start, %s at send end)", r.WindowSeconds, r.LoadAvgStart, r.LoadAvgEnd)
	p("  kinds: %s", kv(r.RequestKinds))
	p("  answers: %s", kv(r.Codes))
	p("  rate: %.1f req/s, %.1f new events accepted/s; skipped %d, gave up %d", r.RequestsPerSec, r.EventsAcceptedPerSec, r.Skipped, r.GaveUp)
	p("  accept latency by provider/answer:")
	labels := make([]string, 0, len(r.Latency))
	for k := range r.Latency {
		labels = append(labels, k)
	}
	sort.Strings(labels)
	for _, k := range labels {
		p("    %-26s %s", k, r.Latency[k])
	}
	if len(r.ServerLatency) > 0 {
		keys := make([]string, 0, len(r.ServerLatency))
		for k := range r.ServerLatency {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + " " + ms(r.ServerLatency[k])
		}
		p("  inside mailhook (means from its /metrics): %s", strings.Join(parts, ", "))
	}
	p("  events: %d distinct sent, %d accepted, %d never accepted; SendGrid batches: %d events, %d accepted + %d duplicate starts",
		r.EventsDistinctSent, r.EventsAccepted, r.EventsNotAccepted, r.BatchEvents, r.BatchAccepted, r.BatchDuplicate)
	p("  messages: %d (%d with a shuffled lifecycle, %d actually arrived out of order)", r.Messages, r.MessagesShuffled, r.MessagesArrivedOutOfOrder)
	p("== processing")
	p("  %d processed; %.1f/s within the window, %.1f/s overall (first request → last processed_at); last processed %.1fs after the send phase; drain wait %.1fs",
		r.EventsProcessed, r.ProcessedPerSecInWindow, r.ProcessedPerSecOverall, r.LastProcessedAfterSendEnd, r.DrainSeconds)
	p("  end to end (first 200 → processed_at): %s", r.EndToEnd)
	p("  expected end statuses: %s", kv(r.ExpectedStatuses))
	p("== notifications: %d rows for the sink (%s); sink got %d distinct ids in %d deliveries (%d ids repeated, %d of other runs)",
		r.Notifications.Expected, kv(r.Notifications.ByType), r.Notifications.DistinctReceived, r.Notifications.Deliveries, r.Notifications.RepeatedIDs, r.Notifications.Foreign)
	if r.NotificationLatency != nil {
		p("  latency (webhook sent → first receipt at the sink): %s", r.NotificationLatency)
	}
	if len(r.TemporalOps) > 0 {
		p("== Temporal calls by mailhook's process during the run: %s", kvf(r.TemporalOps))
		p("  StartWorkflowExecution per event carried by an answered request: %.3f (%d event sends)", r.StartsPerEventSend, r.EventSends)
	}
	if pe := r.PerEvent; pe != nil {
		p("== Temporal work per accepted event: %.2f starts, %.2f workflow tasks, %.2f activity tasks (mailhook's counters)",
			pe.Starts, pe.WorkflowTasks, pe.ActivityTasks)
		if pe.HistorySampled > 0 {
			p("  history of %d sampled runs: %.0f bytes on average (largest %d), %.1f events, %.2f workflow tasks, %.2f activity tasks",
				pe.HistorySampled, pe.HistoryBytes, pe.HistoryBytesMax, pe.HistoryEvents, pe.HistoryWFTasks, pe.HistoryActivityTask)
		}
		if pe.HistoryError != "" {
			p("  history sample: %s", pe.HistoryError)
		}
	}
	if g := r.PG; g != nil {
		p("== PostgreSQL work per accepted event (role %s, %d events): %.2f statements, %.2f round trips, %.2f rows written, %.0f WAL bytes",
			g.Role, g.Events, g.PerEvent.Statements, g.PerEvent.RoundTrips, g.PerEvent.RowsWritten, g.PerEvent.WALBytes)
	}
	for _, pr := range []*ProbeReport{r.DupProbeSequential, r.DupProbe} {
		if pr == nil {
			continue
		}
		p("== duplicate probe: %d re-sends of processed events, %d at once, load average %s", pr.Requests, pr.Concurrency, pr.LoadAvg)
		p("  latency %s; answers %s", pr.Latency, kv(pr.Codes))
		if len(pr.ServerLatency) > 0 {
			p("  inside mailhook (means): handler %s, StartWorkflowExecution %s",
				ms(pr.ServerLatency["handler postscale/duplicate"]), ms(pr.ServerLatency["sdk StartWorkflowExecution"]))
		}
		p("  Temporal calls: %s → StartWorkflowExecution per duplicate %.3f, client calls per duplicate %.3f", kvf(pr.TemporalOps), pr.StartsPerDuplicate, pr.ClientCallsPerDuplicate)
		if pr.Error != "" {
			p("  error: %s", pr.Error)
		}
	}
	if len(r.CPUCores) > 0 {
		p("== CPU (cores busy) in the window: %s; during the drain: %s", kvf(r.CPUCores), kvf(r.CPUCoresDrain))
		p("== CPU seconds from the first request to the drain's end: %s", kvf(r.CPUSecondsRun))
	}
	if m := r.MailhookMemory; m != nil {
		if m.Error != "" {
			p("== mailhook memory: %s", m.Error)
		} else {
			p("== mailhook memory: peak RSS (VmHWM) %s, RSS now %s", mb(m.PeakRSSBytes), mb(m.RSSBytes))
		}
	}
	if f := r.Flood; f != nil {
		p("== flood: %.0f badly signed requests/s asked from %s; %d sent (%.0f/s), %d skipped; answers %s",
			f.Rate, f.Source, f.Sent, f.SentPerSec, f.Skipped, kv(f.Answers))
	}
	for _, n := range r.Notes {
		p("note: %s", n)
	}
	p("== verdict")
	for _, c := range r.Verdict {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		p("  %s %-26s %s", mark, c.Name, c.Detail)
		for _, e := range c.Examples {
			p("         e.g. %s", e)
		}
	}
	if r.Passed {
		p("verdict: PASSED")
	} else {
		p("verdict: FAILED")
	}
}

func kv(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

func kvf(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.2f", k, m[k])
	}
	return strings.Join(parts, " ")
}
