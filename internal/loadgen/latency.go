package loadgen

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// NotificationLatency is how long the load generator's own sink waited for its notifications:
// for every notification of this run's events, its first receipt at the sink minus the moment
// the first webhook request carrying its event was sent (the notification body's data.provider
// and data.event_id name the event). A notification retried or parked before it arrives counts
// from the same send, so an outage of another sink that delays this one shows here.
type NotificationLatency struct {
	Count int           `json:"count"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P95   time.Duration `json:"p95_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
	// ByType splits the same latencies by notification type.
	ByType map[string]Summary `json:"by_type,omitempty"`
	// Unmatched: notifications whose event this run never sent (another run's, or a body
	// without data.event_id); they are left out.
	Unmatched int `json:"unmatched,omitempty"`
}

func (l NotificationLatency) String() string {
	s := Summary{Count: l.Count, Mean: l.Mean, P50: l.P50, P95: l.P95, P99: l.P99, Max: l.Max}.String()
	if len(l.ByType) > 0 {
		types := make([]string, 0, len(l.ByType))
		for t := range l.ByType {
			types = append(types, t)
		}
		sort.Strings(types)
		parts := make([]string, len(types))
		for i, t := range types {
			parts[i] = fmt.Sprintf("%s n=%d p99=%s", t, l.ByType[t].Count, ms(l.ByType[t].P99))
		}
		s += "; " + strings.Join(parts, ", ")
	}
	if l.Unmatched > 0 {
		s += fmt.Sprintf("; %d not of this run's events", l.Unmatched)
	}
	return s
}

// notificationLatency computes NotificationLatency from what the sink received (by id) and when
// each event was first sent, keyed by provider:event_id (Event.Key). A negative latency (the
// clocks are the same, so only a notification of an earlier send of the same event id) counts
// as zero.
func notificationLatency(received map[string]Notification, sentAt map[string]time.Time) NotificationLatency {
	var all []time.Duration
	byType := map[string][]time.Duration{}
	out := NotificationLatency{}
	for _, n := range received {
		at, ok := sentAt[n.Provider+":"+n.EventID]
		if !ok || n.EventID == "" || at.IsZero() || n.First.IsZero() {
			out.Unmatched++
			continue
		}
		d := max(n.First.Sub(at), 0)
		all = append(all, d)
		byType[n.Type] = append(byType[n.Type], d)
	}
	s := Summarize(all)
	out.Count, out.Mean, out.P50, out.P95, out.P99, out.Max = s.Count, s.Mean, s.P50, s.P95, s.P99, s.Max
	if len(byType) > 0 {
		out.ByType = make(map[string]Summary, len(byType))
		for t, v := range byType {
			out.ByType[t] = Summarize(v)
		}
	}
	return out
}

// firstSends is when each event of the run was first sent, by Event.Key.
func (r *runner) firstSends() map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]time.Time, len(r.ev))
	for ev, s := range r.ev {
		if !s.firstSent.IsZero() {
			out[ev.Key()] = s.firstSent
		}
	}
	return out
}

// writeLatencies writes one CSV line per notification of this run's events: when its event was
// first sent (Unix ms), its latency (ms), its type and id; sorted by the send.
func writeLatencies(path string, received map[string]Notification, sentAt map[string]time.Time) error {
	type line struct {
		sent    time.Time
		latency time.Duration
		typ, id string
	}
	var lines []line
	for _, n := range received {
		at, ok := sentAt[n.Provider+":"+n.EventID]
		if !ok || n.EventID == "" || at.IsZero() || n.First.IsZero() {
			continue
		}
		lines = append(lines, line{at, max(n.First.Sub(at), 0), n.Type, n.ID})
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i].sent.Before(lines[j].sent) })
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "sent_unix_ms,latency_ms,type,id")
	for _, l := range lines {
		fmt.Fprintf(w, "%d,%.3f,%s,%s\n", l.sent.UnixMilli(), float64(l.latency)/1e6, l.typ, l.id)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
