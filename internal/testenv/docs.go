package testenv

import (
	"path/filepath"
	"testing"
)

// DocFiles are the README and every page of the manual under docs/ (docs/providers/,
// docs/operations/ and docs/architecture/ included), from a test in a package dir levels below
// the repository's root: what doc tests hold to the code. The dated runs under docs/benchmarks/
// are records of what was run at the time, with the flags and keys of their tree, so they are
// not held to today's commands and config (their links are checked all the same).
func DocFiles(t testing.TB, up string) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"docs/*.md", "docs/providers/*.md", "docs/operations/*.md", "docs/architecture/*.md", "README.md"} {
		m, err := filepath.Glob(filepath.Join(up, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 3 {
		t.Fatalf("found only %v under %s: run from a package of the repository", files, up)
	}
	return files
}
