package buildinfo

import (
	"runtime"
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
