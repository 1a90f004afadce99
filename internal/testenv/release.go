package testenv

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// PreviousRelease returns the path of the previous release's `mailhook` binary and its commit:
// the commit pinned in deploy/previous-release, built from this repository's history and cached
// outside it by scripts/previous-release.sh (which `make test` runs first). A clone without that
// commit (a shallow one) fails the test with its name, or skips it under -short.
func PreviousRelease(t testing.TB) (bin, commit string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the test that runs the previous release")
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "previous-release.sh")
	start := time.Now()
	out, err := exec.Command(script).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		err = errWithOutput(err, string(ee.Stderr))
	}
	Need(t, "the previous release's binary (scripts/previous-release.sh)", err)
	bin = strings.TrimSpace(lastLine(string(out)))
	commit = filepath.Base(filepath.Dir(bin))
	t.Logf("previous release %s: %s (%s)", commit[:min(7, len(commit))], bin, time.Since(start).Round(time.Millisecond))
	return bin, commit
}
