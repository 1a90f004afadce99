package testenv

import (
	"path/filepath"
	"testing"
)

// DocFiles are the README and every page of docs/ (docs/providers/ included), from a test in a
// package dir levels below the repository's root: what doc tests hold to the code.
func DocFiles(t testing.TB, up string) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"docs/*.md", "docs/providers/*.md", "README.md"} {
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
