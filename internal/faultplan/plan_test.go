package faultplan_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/faultplan"
)

func TestTheSameSeedGivesTheSameSchedule(t *testing.T) {
	o := faultplan.Options{Seed: 7, Duration: 30 * time.Minute, Quiet: 5 * time.Minute, Faults: 40}
	a, err := faultplan.Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := faultplan.Plan(o)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 7 planned two different schedules:\n%v\n%v", a, b)
	}
	o.Seed = 8
	c, _ := faultplan.Plan(o)
	if reflect.DeepEqual(a, c) {
		t.Fatalf("seeds 7 and 8 planned the same schedule")
	}
}

func TestAScheduleCoversEveryKindOverlapsAndRespectsItsResources(t *testing.T) {
	for seed := int64(1); seed <= 50; seed++ {
		o := faultplan.Options{Seed: seed, Duration: 30 * time.Minute, Quiet: 5 * time.Minute, Faults: 30}
		plan, err := faultplan.Plan(o)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[faultplan.Kind]bool{}
		for i, f := range plan {
			kinds[f.Kind] = true
			if f.At < 0 || f.End() > o.Duration-o.Quiet {
				t.Errorf("seed %d: %s ends after the quiet end begins (%s)", seed, f, o.Duration-o.Quiet)
			}
			if i > 0 && plan[i-1].At > f.At {
				t.Errorf("seed %d: not sorted by start at %d", seed, i)
			}
			httpDown := 0
			for _, g := range plan {
				if g.At < f.End() && f.At < g.End() && (g.Kind == faultplan.KillHTTP || g.Kind == faultplan.TermHTTP) {
					httpDown++
				}
				if g != f && g.Resource() == f.Resource() && g.At < f.End()+10*time.Second && f.At < g.End()+10*time.Second {
					t.Errorf("seed %d: %s and %s on %s less than 10 s apart", seed, f, g, f.Resource())
				}
				if g == f || !(g.At < f.End() && f.At < g.End()) {
					continue
				}
				if samePG(f, g) || (sink(f) && sink(g)) || (sameProc(f, g)) || (f.Kind == faultplan.TemporalDown && g.Kind == faultplan.TemporalDown) {
					t.Errorf("seed %d: %s and %s overlap on one resource", seed, f, g)
				}
			}
			if (f.Kind == faultplan.KillHTTP || f.Kind == faultplan.TermHTTP) && httpDown >= 2 {
				t.Errorf("seed %d: %s leaves no HTTP process answering", seed, f)
			}
		}
		if len(kinds) != len(faultplan.Kinds) {
			t.Errorf("seed %d: %d of %d kinds drawn: %v", seed, len(kinds), len(faultplan.Kinds), plan)
		}
		if faultplan.Overlaps(plan) < 5 {
			t.Errorf("seed %d: only %d overlapping pairs in 30 faults over 25 minutes", seed, faultplan.Overlaps(plan))
		}
	}
}

func samePG(a, b faultplan.Fault) bool {
	pg := func(k faultplan.Kind) bool {
		return k == faultplan.PostgresDown || k == faultplan.PostgresFlap || k == faultplan.PostgresReadOnly
	}
	return pg(a.Kind) && pg(b.Kind)
}

func sink(f faultplan.Fault) bool {
	switch f.Kind {
	case faultplan.SinkRefuse, faultplan.SinkHang, faultplan.Sink429, faultplan.Sink500Some:
		return true
	}
	return false
}

func sameProc(a, b faultplan.Fault) bool {
	http := func(k faultplan.Kind) bool { return k == faultplan.KillHTTP || k == faultplan.TermHTTP }
	worker := func(k faultplan.Kind) bool { return k == faultplan.KillWorker || k == faultplan.TermWorker }
	return a.Target == b.Target && ((http(a.Kind) && http(b.Kind)) || (worker(a.Kind) && worker(b.Kind)))
}

func TestScaleShortensFaultsAndUnknownKindsAreRefused(t *testing.T) {
	plan, err := faultplan.Plan(faultplan.Options{Seed: 1, Duration: 4 * time.Minute, Quiet: time.Minute, Faults: 12, Scale: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range plan {
		if f.For > 36*time.Second {
			t.Errorf("%s: longer than 0.3 of the longest span", f)
		}
	}
	if _, err := faultplan.ParseKinds("postgres-down,disk-full"); err == nil {
		t.Errorf("an unknown kind was taken")
	}
	if _, err := faultplan.Plan(faultplan.Options{Duration: time.Minute, Quiet: time.Minute, Faults: 1}); err == nil {
		t.Errorf("a run with no time for faults was planned")
	}
}

// The short run of the suite (TestFaultsTogether: 4 minutes, the last one quiet, 14 faults at
// 0.35 of their lengths) still carries out every kind, whatever the seed.
func TestAShortRunStillDrawsEveryKind(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		plan, err := faultplan.Plan(faultplan.Options{Seed: seed, Duration: 4 * time.Minute, Quiet: time.Minute, Faults: 14, Scale: 0.35})
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[faultplan.Kind]bool{}
		for _, f := range plan {
			kinds[f.Kind] = true
		}
		if len(kinds) != len(faultplan.Kinds) {
			t.Errorf("seed %d: %d of %d kinds: %v", seed, len(kinds), len(faultplan.Kinds), plan)
		}
	}
}
