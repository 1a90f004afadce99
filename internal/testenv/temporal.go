// Package testenv starts the real dependencies integration tests run against: a Temporal dev
// server (the Temporal CLI's start-dev). PostgreSQL test databases come from storetest.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"go/build"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/mailhook/mailhook/internal/domain"
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

// DevServer is a running Temporal dev server process (`temporal server start-dev`).
type DevServer struct {
	cmd      *exec.Cmd
	hostPort string
	client   client.Client
	out      *tail
	exited   chan struct{} // closed when the process has exited; exitErr is set then
	exitErr  error
	stopOnce sync.Once
	stopErr  error
}

// StartTemporal starts a Temporal dev server with mailhook's search attributes registered.
// The caller stops it (Stop) or lets t.Cleanup do it.
func StartTemporal(t testing.TB, o DevServerOptions) *DevServer {
	t.Helper()
	start := time.Now()
	srv, err := StartTemporalServer(o)
	Need(t, "a Temporal dev server", err)
	t.Cleanup(func() { _ = srv.Stop() })
	t.Logf("Temporal dev server on %s ready in %s", srv.FrontendHostPort(), time.Since(start).Round(time.Millisecond))
	return srv
}

// StartTemporalServer is StartTemporal without a testing.TB, for TestMain.
//
// It starts the CLI itself, with the arguments the SDK's testsuite.StartDevServer would pass,
// rather than through StartDevServer, which gives up after a fixed minute of failed connects
// (and leaves the process running). A file-backed server restarted on a loaded machine took
// longer than that (issue 18). Here the wait is progress-based like every other wait of the
// tests: it ends when the frontend answers for the namespace, fails at once when the process
// exits, and fails when the process has neither used CPU nor written output nor got further
// towards ready (listening, then answering) for Stall.
func StartTemporalServer(o DevServerOptions) (*DevServer, error) {
	cli, err := TemporalCLI()
	if err != nil {
		return nil, err
	}
	hostPort := o.HostPort
	if hostPort == "" {
		if hostPort, err = freeHostPort(); err != nil {
			return nil, err
		}
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return nil, fmt.Errorf("Temporal dev server address %q: %w", hostPort, err)
	}
	// What testsuite.StartDevServer runs for these options (SDK v1.51, prepareCommand).
	args := []string{
		"server", "start-dev",
		"--ip", host, "--port", port,
		"--namespace", namespace,
		"--dynamic-config-value", "frontend.enableServerVersionCheck=false",
		"--log-level", "error",
		"--headless",
	}
	if o.DBFile != "" {
		args = append(args, "--db-filename", o.DBFile)
	}
	for _, n := range domain.SearchAttributeNames {
		args = append(args, "--search-attribute", n+"="+temporal.NewSearchAttributeKeyKeyword(n).GetValueType().String())
	}
	if o.DBFile != "" {
		// The tests restart a file-backed server by stopping its process, never the machine, so
		// SQLite's fsync on every commit buys them nothing; without it (and with a write-ahead
		// log) the server starts workflows 2.3 times as fast (400 starts: 12.8 s, 5.5 s), which
		// was what bounded the drain after TestProcessFaults' Temporal outage.
		args = append(args, "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=off")
	}

	s := &DevServer{hostPort: hostPort, out: &tail{}, exited: make(chan struct{})}
	s.cmd = exec.Command(cli, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start Temporal dev server (%s): %w", cli, err)
	}
	go func() {
		s.exitErr = s.cmd.Wait()
		close(s.exited)
	}()

	opts := client.Options{
		HostPort:  hostPort,
		Namespace: namespace,
		Logger:    sdklog.NewStructuredLogger(quietLogger()),
	}
	what := fmt.Sprintf("Temporal dev server on %s (%s, pid %d) to answer", hostPort, cli, s.cmd.Process.Pid)
	reached := int64(0) // 1 once it accepts TCP connections
	var lastErr error
	err = Wait(what, Stall, func() (int64, bool, error) {
		select {
		case <-s.exited:
			return 0, true, nil // reported below
		default:
		}
		if c, err := net.DialTimeout("tcp", hostPort, time.Second); err == nil {
			c.Close()
			reached = max(reached, 1)
		}
		c, err := s.dial(opts)
		if err != nil {
			lastErr = err
		} else {
			s.client = c
			return 0, true, nil
		}
		return reached<<40 + s.out.written() + cpuTicks(s.cmd.Process.Pid), false, nil
	})
	select {
	case <-s.exited:
		err = fmt.Errorf("Temporal dev server (%s %s) exited before it answered: %v", cli, strings.Join(args, " "), s.exitErr)
	default:
	}
	if err == nil {
		return s, nil
	}
	if lastErr != nil {
		err = fmt.Errorf("%w; last connect: %v", err, lastErr)
	}
	if s.client != nil {
		s.client.Close()
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	return nil, fmt.Errorf("%w\n--- its output (last %d bytes):\n%s", err, tailSize, s.out.String())
}

const namespace = "default"

// dial connects a client and checks that the namespace answers, each try bounded so one slow
// try does not hold the wait (a try that runs out is no progress, not a verdict) and ended when
// the process exits.
func (s *DevServer) dial(opts client.Options) (client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { // a process that exits ends the try at once
		select {
		case <-s.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: opts.Namespace}); err != nil {
		c.Close()
		return nil, fmt.Errorf("describe namespace %s: %w", opts.Namespace, err)
	}
	return c, nil
}

// Client is a client connected to the server's namespace ("default"), closed by Stop.
func (s *DevServer) Client() client.Client { return s.client }

// FrontendHostPort is the server's frontend address.
func (s *DevServer) FrontendHostPort() string { return s.hostPort }

// Stop interrupts the server and waits until it has exited (a clean shutdown: exit status 0).
// The wait is progress-based too: a server that has used no CPU and written nothing for Stall
// since the interrupt is killed, and Stop says so. Stop may be called more than once; later
// calls return what the first returned. A server that had exited by itself is an error.
func (s *DevServer) Stop() error {
	s.stopOnce.Do(func() {
		if s.client != nil {
			s.client.Close()
		}
		select {
		case <-s.exited:
			s.stopErr = fmt.Errorf("Temporal dev server on %s had exited before Stop: %v\n%s", s.hostPort, s.exitErr, s.out.String())
			return
		default:
		}
		if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
			s.stopErr = fmt.Errorf("interrupt Temporal dev server: %w", err)
		}
		err := Wait(fmt.Sprintf("Temporal dev server on %s to exit", s.hostPort), Stall, func() (int64, bool, error) {
			select {
			case <-s.exited:
				return 0, true, nil
			default:
				return s.out.written() + cpuTicks(s.cmd.Process.Pid), false, nil
			}
		})
		if err != nil {
			_ = s.cmd.Process.Kill()
			<-s.exited
			s.stopErr = fmt.Errorf("%w: killed\n%s", err, s.out.String())
			return
		}
		if s.stopErr == nil && s.exitErr != nil {
			s.stopErr = fmt.Errorf("Temporal dev server on %s: %w\n%s", s.hostPort, s.exitErr, s.out.String())
		}
	})
	return s.stopErr
}

// cpuTicks is the CPU time (user + system, in clock ticks) the process has used, from
// /proc/<pid>/stat; 0 where there is no /proc. A starting server that is making headway uses
// CPU even while it prints nothing (it logs errors only).
func cpuTicks(pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ... utime stime: fields 14 and 15; comm may hold spaces.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

const tailSize = 8 << 10

// tail keeps the last tailSize bytes written to it and counts all of them: a process's output
// for an error message, and its growth as progress.
type tail struct {
	mu  sync.Mutex
	n   int64
	buf []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n += int64(len(p))
	w.buf = append(w.buf, p...)
	if len(w.buf) > tailSize {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-tailSize:]...)
	}
	return len(p), nil
}

func (w *tail) written() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// DeadlockDetectionTimeout is the worker.deadlock_detection_timeout of every worker the tests
// start: the SDK's 1 s fails workflow tasks as deadlocks (TMPRL1101) when the tests' own servers
// starve them of CPU, which says nothing of mailhook (issue 40: `make test` went red so at a load
// of 9 to 33 on 2 cores).
const DeadlockDetectionTimeout = 30 * time.Second
