// Package testenv starts the real dependencies integration tests run against: a Temporal dev
// server (the Temporal CLI's start-dev). PostgreSQL test databases come from storetest.
package testenv

import (
	"context"
	"fmt"
	"go/build"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/internal/ingest"
)

// TemporalCLI finds the Temporal CLI: $TEMPORAL_CLI, then `temporal` on PATH, then
// $GOPATH/bin/temporal (where `make test` installs it).
func TemporalCLI() (string, error) {
	if p := os.Getenv("TEMPORAL_CLI"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("TEMPORAL_CLI=%s: %w", p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		gopath = build.Default.GOPATH
	}
	p := filepath.Join(gopath, "bin", "temporal")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no Temporal CLI: set TEMPORAL_CLI, or run scripts/ensure-temporal-cli.sh (looked on PATH and at %s)", p)
	}
	return p, nil
}

// Need skips under -short and otherwise fails with what is missing: in CI no integration
// test may skip.
func Need(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if testing.Short() {
		t.Skipf("-short: skipping, %s is not available: %v", what, err)
	}
	t.Fatalf("%s is required for this integration test and is not available: %v (run go test -short to skip integration tests)", what, err)
}

// DevServerOptions for StartTemporal.
type DevServerOptions struct {
	// HostPort fixes the frontend address (for restart tests); empty picks a free port.
	HostPort string
	// DBFile makes the server file-backed so it keeps state across a restart.
	DBFile string
}

// StartTemporal starts a Temporal dev server with mailhook's search attributes registered.
// The caller stops it (Stop) or lets t.Cleanup do it.
func StartTemporal(t testing.TB, o DevServerOptions) *testsuite.DevServer {
	t.Helper()
	srv, err := StartTemporalServer(o)
	Need(t, "a Temporal dev server", err)
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// StartTemporalServer is StartTemporal without a testing.TB, for TestMain.
func StartTemporalServer(o DevServerOptions) (*testsuite.DevServer, error) {
	cli, err := TemporalCLI()
	if err != nil {
		return nil, err
	}
	var attrs []temporal.SearchAttributeUpdate
	for _, k := range []temporal.SearchAttributeKeyKeyword{ingest.ProviderKey, ingest.EventTypeKey, ingest.MessageIDKey} {
		attrs = append(attrs, k.ValueSet(""))
	}
	extra := []string{"--headless"}
	if o.DBFile != "" {
		// The tests restart a file-backed server by stopping its process, never the machine, so
		// SQLite's fsync on every commit buys them nothing; without it (and with a write-ahead
		// log) the server starts workflows 2.3 times as fast (400 starts: 12.8 s, 5.5 s), which
		// was what bounded the drain after TestProcessFaults' Temporal outage.
		extra = append(extra, "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=off")
	}
	srv, err := testsuite.StartDevServer(context.Background(), testsuite.DevServerOptions{
		ExistingPath: cli,
		ClientOptions: &client.Options{
			HostPort:  o.HostPort,
			Namespace: "default",
			Logger:    sdklog.NewStructuredLogger(quietLogger()),
		},
		DBFilename:       o.DBFile,
		LogLevel:         "error",
		SearchAttributes: temporal.NewSearchAttributes(attrs...),
		ExtraArgs:        extra,
		Stdout:           io.Discard,
		Stderr:           io.Discard,
	})
	if err != nil {
		return nil, fmt.Errorf("start Temporal dev server (%s): %w", cli, err)
	}
	return srv, nil
}

// FreeHostPort returns a 127.0.0.1 address with a port free right now.
func FreeHostPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
