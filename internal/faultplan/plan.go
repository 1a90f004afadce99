// Package faultplan draws a schedule of overlapping faults from a seed: which fault, on which
// process, when it starts and how long it lasts. The same seed and options give the same
// schedule, so a run that found something can be run again as it was. It only plans; the test or
// tool that runs mailhook carries the faults out against processes and clusters it started.
package faultplan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a fault mailhook promises to survive.
type Kind string

const (
	KillHTTP         Kind = "kill-http"          // an HTTP process killed -9, restarted after For
	TermHTTP         Kind = "term-http"          // an HTTP process stopped with SIGTERM (a deploy), restarted after For
	KillWorker       Kind = "kill-worker"        // a worker killed -9 (mid-drain, mid-run), restarted after For
	TermWorker       Kind = "term-worker"        // a worker stopped with SIGTERM (a deploy), restarted after For
	TemporalDown     Kind = "temporal-down"      // the Temporal server stopped, restarted after For
	PostgresDown     Kind = "postgres-down"      // PostgreSQL stopped (immediate: a crash), restarted after For
	PostgresFlap     Kind = "postgres-flap"      // PostgreSQL restarted twice within For
	PostgresReadOnly Kind = "postgres-read-only" // PostgreSQL answers read-only (a standby not yet promoted) for For
	SinkRefuse       Kind = "sink-refuse"        // the sink answers 503 to everything
	SinkHang         Kind = "sink-hang"          // the sink answers after the attempt timeout
	Sink429          Kind = "sink-429"           // the sink answers 429 with Retry-After
	Sink500Some      Kind = "sink-500-some"      // the sink answers 500 for some ids only
	NATSDown         Kind = "nats-down"          // the NATS server of a NATS sink stopped, restarted after For
	RabbitMQDown     Kind = "rabbitmq-down"      // the RabbitMQ node of a RabbitMQ sink crashed, restarted after For
)

// Kinds is every kind, in the order the documentation lists them.
var Kinds = []Kind{KillHTTP, TermHTTP, KillWorker, TermWorker, TemporalDown, PostgresDown, PostgresFlap,
	PostgresReadOnly, SinkRefuse, SinkHang, Sink429, Sink500Some, NATSDown, RabbitMQDown}

// resource is what a fault acts on: two faults on one resource never overlap (a PostgreSQL
// cannot be down and read-only at once; a process killed is not also stopped), faults on
// different resources may.
func (k Kind) resource(target int) string {
	switch k {
	case KillHTTP, TermHTTP:
		return fmt.Sprintf("http-%d", target)
	case KillWorker, TermWorker:
		return fmt.Sprintf("worker-%d", target)
	case TemporalDown:
		return "temporal"
	case PostgresDown, PostgresFlap, PostgresReadOnly:
		return "postgres"
	case NATSDown:
		return "nats"
	case RabbitMQDown:
		return "rabbitmq"
	default:
		return "sink"
	}
}

// span is how long a fault of the kind lasts, before Options.Scale: from..to.
func (k Kind) span() (from, to time.Duration) {
	switch k {
	case KillHTTP, TermHTTP, KillWorker, TermWorker:
		return 2 * time.Second, 20 * time.Second
	case TemporalDown:
		return 30 * time.Second, 2 * time.Minute
	case PostgresDown, PostgresReadOnly:
		return 20 * time.Second, 90 * time.Second
	case PostgresFlap:
		return 40 * time.Second, 60 * time.Second
	case NATSDown, RabbitMQDown:
		return 20 * time.Second, 90 * time.Second
	default:
		return 30 * time.Second, 2 * time.Minute
	}
}

// Options shape a schedule.
type Options struct {
	Seed int64
	// Duration is the run's length; Quiet, its fault-free end (every fault has ended by
	// Duration-Quiet, so the run's last stretch shows the recovery under load).
	Duration, Quiet time.Duration
	// Faults is how many faults to draw.
	Faults int
	// Kinds to draw from; empty: every kind.
	Kinds []Kind
	// HTTP and Workers are how many processes of each there are (targets 0..n-1); zero: 2.
	HTTP, Workers int
	// Scale multiplies every fault's length (a short run keeps the mix of faults with shorter
	// ones); zero: 1.
	Scale float64
}

// Fault is one fault of the schedule.
type Fault struct {
	Kind   Kind          `json:"kind"`
	Target int           `json:"target"` // which HTTP process or worker; 0 for the others
	At     time.Duration `json:"at"`     // from the run's start
	For    time.Duration `json:"for"`
}

// End is when the fault ends.
func (f Fault) End() time.Duration { return f.At + f.For }

// Resource is what the fault acts on ("postgres", "temporal", "sink", "http-0", …): a run
// carries out the faults of one resource one after the other, never two at once, however late
// the one before it ended (a restart on a loaded machine takes seconds).
func (f Fault) Resource() string { return f.Kind.resource(f.Target) }

// gap is the least time between two faults on one resource: the first's restart may take
// that long.
const gap = 10 * time.Second

func (f Fault) String() string {
	target := ""
	switch f.Kind {
	case KillHTTP, TermHTTP, KillWorker, TermWorker:
		target = fmt.Sprintf(" #%d", f.Target)
	}
	return fmt.Sprintf("%s%s at %s for %s", f.Kind, target, f.At.Round(time.Second), f.For.Round(time.Second))
}

// Plan draws the schedule, sorted by start. Every kind in o.Kinds is drawn at least once when
// o.Faults allows, the rest at random; a fault that finds no room on its resource is drawn
// again elsewhere and, for a kind not yet drawn, shorter, and is left out after many tries (Plan then returns fewer than o.Faults).
func Plan(o Options) ([]Fault, error) {
	if o.Duration <= o.Quiet || o.Duration <= 0 {
		return nil, fmt.Errorf("faultplan: the run (%s) must be longer than its quiet end (%s)", o.Duration, o.Quiet)
	}
	kinds := o.Kinds
	if len(kinds) == 0 {
		kinds = Kinds
	}
	for _, k := range kinds {
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("faultplan: unknown fault kind %q (known: %s)", k, joinKinds(Kinds))
		}
	}
	if o.HTTP <= 0 {
		o.HTTP = 2
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x6d61696c686f6f6b)) // "mailhook"
	window := o.Duration - o.Quiet
	var out []Fault
	for i := 0; i < o.Faults; i++ {
		k := kinds[rng.IntN(len(kinds))]
		if i < len(kinds) {
			k = kinds[i]
		}
		from, to := k.span()
		length := time.Duration(float64(from+time.Duration(rng.Int64N(int64(to-from)+1))) * o.Scale).Round(100 * time.Millisecond)
		if length >= window {
			length = window / 2
		}
		tries := 50
		if i < len(kinds) {
			tries = 1000 // every kind at least once: look harder for its room
		}
		for try := 0; try < tries; try++ {
			if try > 0 && try%100 == 0 {
				length = max(length/2, time.Second) // no room that long: a shorter one
			}
			f := Fault{Kind: k, For: length, At: time.Duration(rng.Int64N(int64(window - length))).Round(100 * time.Millisecond)}
			switch k {
			case KillHTTP, TermHTTP:
				f.Target = rng.IntN(o.HTTP)
			case KillWorker, TermWorker:
				f.Target = rng.IntN(o.Workers)
			}
			if !clashes(out, f, o.HTTP) {
				out = append(out, f)
				break
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Fault) int { return int(a.At - b.At) })
	return out, nil
}

// clashes: f overlaps a fault on its resource, or would leave no HTTP process answering (a
// provider would then see timeouts, which says nothing about mailhook).
func clashes(planned []Fault, f Fault, httpProcs int) bool {
	httpDown := 0
	if f.Kind == KillHTTP || f.Kind == TermHTTP {
		httpDown = 1
	}
	for _, g := range planned {
		if g.Resource() == f.Resource() && f.At < g.End()+gap && g.At < f.End()+gap {
			return true
		}
		if !overlap(f, g) {
			continue
		}
		if g.Resource() == f.Resource() {
			return true
		}
		if httpDown > 0 && (g.Kind == KillHTTP || g.Kind == TermHTTP) {
			httpDown++
		}
	}
	return httpDown >= httpProcs && httpDown > 0
}

func overlap(a, b Fault) bool { return a.At < b.End() && b.At < a.End() }

// Overlaps counts the pairs of faults that are on at the same time.
func Overlaps(faults []Fault) int {
	n := 0
	for i := range faults {
		for j := i + 1; j < len(faults); j++ {
			if overlap(faults[i], faults[j]) {
				n++
			}
		}
	}
	return n
}

// ParseKinds reads a comma-separated list of kinds.
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		k := Kind(p)
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("unknown fault kind %q (known: %s)", p, joinKinds(Kinds))
		}
		out = append(out, k)
	}
	return out, nil
}

func joinKinds(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}
