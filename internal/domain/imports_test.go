package domain_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/mailhook/mailhook/"

// deps lists mailhook's own packages that pkg depends on, directly or not, relative to the
// module. go test puts the go command of the toolchain running the tests first on PATH.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var ours []string
	for _, p := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(p, module); ok && rel != pkg {
			ours = append(ours, rel)
		}
	}
	return ours
}

// The edges that accept events and operator requests start workflows through acceptance.Starter
// and speak domain's vocabulary: a change to how an event is processed (workflows, activities)
// must not reach them, nor pull the worker's code into what they build.
func TestEdgesDependOnNeitherWorkflowsNorActivities(t *testing.T) {
	for _, edge := range []string{"internal/httpapi", "internal/acceptance", "internal/reconcile", "internal/retention"} {
		for _, d := range deps(t, edge) {
			if d == "workflows" || d == "activities" {
				t.Errorf("%s depends on %s", edge, d)
			}
		}
	}
}

// The vocabulary is the bottom of the graph: everything may import it, so it imports nothing of
// mailhook's.
func TestDomainImportsNothingOfMailhooks(t *testing.T) {
	if d := deps(t, "internal/domain"); len(d) > 0 {
		t.Errorf("internal/domain depends on %v", d)
	}
}
