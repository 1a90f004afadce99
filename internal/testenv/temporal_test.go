package testenv

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
)

// A file-backed server stopped and started again on its port and file answers for the
// namespace; Stop is clean (exit status 0) and may be called again.
func TestTemporalServerRestartsOnItsPortAndFile(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	o := DevServerOptions{HostPort: FreeHostPort(t), DBFile: filepath.Join(t.TempDir(), "temporal.db")}
	srv := StartTemporal(t, o)
	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	srv = StartTemporal(t, o)
	if srv.FrontendHostPort() != o.HostPort {
		t.Fatalf("restarted on %s, want %s", srv.FrontendHostPort(), o.HostPort)
	}
	if _, err := srv.Client().WorkflowService().DescribeNamespace(t.Context(), &workflowservice.DescribeNamespaceRequest{Namespace: "default"}); err != nil {
		t.Fatalf("describe namespace after the restart: %v", err)
	}
}

// A server that cannot start (its port is taken) fails the start as soon as its process
// exits, with its output, instead of after a wait.
func TestStartTemporalServerFailsWhenTheServerExits(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	_, err := TemporalCLI()
	Need(t, "the Temporal CLI", err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	start := time.Now()
	srv, err := StartTemporalServer(DevServerOptions{HostPort: ln.Addr().String()})
	if err == nil {
		_ = srv.Stop()
		t.Fatal("a dev server started on a port another listener holds")
	}
	if !strings.Contains(err.Error(), "exited before it answered") {
		t.Fatalf("error %q does not say the server exited", err)
	}
	if took := time.Since(start); took >= Stall {
		t.Fatalf("the start took %s to fail, a stall's worth", took)
	}
	t.Logf("failed in %s: %v", time.Since(start).Round(time.Millisecond), err)
}

func TestTailKeepsTheEndAndCountsAll(t *testing.T) {
	t.Parallel()
	w := &tail{}
	for range 3 {
		_, _ = w.Write([]byte(strings.Repeat("x", tailSize/2)))
	}
	_, _ = w.Write([]byte("end"))
	if got := w.written(); got != 3*tailSize/2+3 {
		t.Fatalf("written %d", got)
	}
	if s := w.String(); len(s) != tailSize || !strings.HasSuffix(s, "end") {
		t.Fatalf("kept %d bytes ending %q", len(s), s[len(s)-3:])
	}
}
