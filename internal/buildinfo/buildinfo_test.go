package buildinfo

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestReadPrefersTheStampedVersion(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })

	version = ""
	if got := Read(); got.Version == "" || got.Revision == "" || got.GoVersion != runtime.Version() {
		t.Fatalf("unstamped build: %+v", got)
	}
	version = "v9.8.7"
	if got := Read(); got.Version != "v9.8.7" {
		t.Fatalf("stamped build: %+v", got)
	}
}

// A build without Go's VCS stamp (the Dockerfile's -buildvcs=false) reports the stamped
// revision instead of "unknown".
func TestABuildWithoutVCSReportsTheStampedRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "mailhook")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin,
		"-ldflags", "-X github.com/mailhook/mailhook/internal/buildinfo.revision=0123456789ab -X github.com/mailhook/mailhook/internal/buildinfo.version=v0.0.1-test",
		"github.com/mailhook/mailhook/cmd/mailhook")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "mailhook v0.0.1-test (revision 0123456789ab, ") {
		t.Fatalf("mailhook --version: %q %v", out, err)
	}
}
