package domain_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// The edges that accept events and operator requests start workflows through start.Starter
// and speak domain's vocabulary: a change to how an event is processed (workflows, activities)
// must not reach them, nor pull the worker's code into what they build.
func TestEdgesDependOnNeitherWorkflowsNorActivities(t *testing.T) {
	for _, edge := range []string{"internal/httpapi", "internal/acceptance", "internal/reconcile", "internal/retention", "internal/backfill"} {
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

// docs/ARCHITECTURE.md's package map names every package folder under internal/ (its top
// level), and every folder it names exists: a package moved or added shows up here.
func TestPackageMapMatchesTheTree(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "\n## Package map\n")
	if !ok {
		t.Fatal(`docs/ARCHITECTURE.md has no "## Package map"`)
	}
	table, _, _ := strings.Cut(after, "\n## ")
	named := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range regexp.MustCompile("`([a-z][a-z0-9/-]*)`").FindAllStringSubmatch(cells[1], -1) {
			p := m[1]
			if !strings.Contains(p, "/") && p != "workflows" && p != "activities" {
				continue // a sibling named short, as in "`natssink`, `amqpsink`"
			}
			named[p] = true
			if st, err := os.Stat(filepath.Join("../..", p)); err != nil || !st.IsDir() {
				t.Errorf("the package map names %s, which is not a folder", p)
			}
		}
	}
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !named["internal/"+e.Name()] {
			t.Errorf("the package map does not name internal/%s", e.Name())
		}
	}
}

// The workflow package holds orchestration: it reaches PostgreSQL only through activities, so it
// does not import the store (nor pgx) itself.
func TestWorkflowsDoNotImportTheStore(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, module+"workflows").Output()
	if err != nil {
		t.Fatalf("go list workflows: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == module+"internal/store" || strings.HasPrefix(p, "github.com/jackc/") {
			t.Errorf("workflows imports %s", p)
		}
	}
}
