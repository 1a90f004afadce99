package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// PreviousReleaseFile pins the release the upgrade test runs beside this tree: a commit of this
// repository's history (there are no tags), one line. Move it forward when a release is cut.
const PreviousReleaseFile = "deploy/previous-release"

// PreviousRelease returns the path of the previous release's `mailhook` binary: the commit named
// in deploy/previous-release, built from this repository's own history (git archive, so the
// work tree and its worktrees are untouched) and cached outside the repository under
// ~/.cache/mailhook/previous-release/<commit>/. A clone without that commit (a shallow one)
// fails the test with its name, or skips it under -short.
func PreviousRelease(t testing.TB) (bin, commit string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the test that builds the previous release")
	}
	root := repoRoot()
	raw, err := os.ReadFile(filepath.Join(root, PreviousReleaseFile))
	if err != nil {
		t.Fatalf("the previous release: %v", err)
	}
	commit = strings.TrimSpace(string(raw))
	if len(commit) != 40 {
		t.Fatalf("%s holds %q, want one full commit hash", PreviousReleaseFile, commit)
	}
	cache, err := os.UserCacheDir()
	Need(t, "a cache directory for the previous release's binary", err)
	dir := filepath.Join(cache, "mailhook", "previous-release", commit)
	bin = filepath.Join(dir, "mailhook")
	if _, err := os.Stat(bin); err == nil {
		return bin, commit
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		shallow, _ := exec.Command("git", "-C", root, "rev-parse", "--is-shallow-repository").Output()
		t.Fatalf("the previous release %s (%s) is not in this clone's history (shallow: %s): the upgrade test builds it from there; fetch the full history (git fetch --unshallow): %v %s",
			commit, PreviousReleaseFile, strings.TrimSpace(string(shallow)), err, out)
	}
	src := t.TempDir()
	start := time.Now()
	archive := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Built beside its final name and renamed, so a test that stops mid-build never leaves a
	// half-written binary in the cache.
	tmp := bin + fmt.Sprintf(".%d.tmp", os.Getpid())
	build := exec.Command("go", "build", "-trimpath", "-o", tmp, "./cmd/mailhook")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		t.Fatalf("build the previous release %s: %v\n%s", commit, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built the previous release %s into %s in %s", commit[:7], bin, time.Since(start).Round(time.Millisecond))
	return bin, commit
}

// repoRoot is the repository this package was built from.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
