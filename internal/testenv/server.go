package testenv

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RealServer is a Temporal server v1.29.1 with PostgreSQL persistence and visibility, started by
// scripts/temporal-server.sh: what users run, where the dev server hides the cost of regular
// activities and a database's latency.
type RealServer struct {
	Address string
	state   string
	port    string
	script  string
	pool    realServerPool
}

// RealServerMaxConns is the PostgreSQL connections each of the real server's four services may
// open to its main database (TEMPORAL_SERVER_MAX_CONNS; the script's default, for benchmarks,
// is 20), and RealServerVisibilityMaxConns to its visibility database (one statement at a time
// is enough there: it took 5-7 of the 16 it had). The server shares the tests' PostgreSQL,
// where it was the largest client: 34 of the 42 connections the e2e tests held at their peak;
// with 4 and 4 it held 17-20 at most.
const (
	RealServerMaxConns           = 3
	RealServerVisibilityMaxConns = 1
	// RealServerConns is the most one real server holds: what StartRealServer claims of the
	// package's budget (SetConnBudget).
	RealServerConns = 4 * (RealServerMaxConns + RealServerVisibilityMaxConns)
)

// PrivateRealServerMaxConns and PrivateRealServerVisibilityMaxConns are the same on a private
// cluster (PG naming another server than the shared one, as a long faults run's does), where
// the shared server's budget does not apply. With 3-4 + 1 the server's own persistence calls
// timed out on a loaded machine (seed 17, load average 33), and a run counted their retries as
// Temporal's work. Not the script's 20: on the 2-core machine PostgreSQL runs only a few
// statements at once, so more connections only queue there instead of in the pool; 8 + 2 is
// twice what the shared server's run had, 40 of the private cluster's connections in all.
const (
	PrivateRealServerMaxConns           = 8
	PrivateRealServerVisibilityMaxConns = 2
)

// realServerPool is what each of a real server's services may open on its PostgreSQL, and
// whether that is the shared server, whose budget the test then claims of (claimRealServer).
type realServerPool struct {
	main, visibility int
	shared           bool
}

// realServerPoolFor sizes the real server's pools for the PostgreSQL the script puts its
// databases on: pg is its PG, where unset means the script's default, the shared server at
// 127.0.0.1:5432.
func realServerPoolFor(pg string) realServerPool {
	if sharedPostgres(pg) {
		return realServerPool{main: RealServerMaxConns, visibility: RealServerVisibilityMaxConns, shared: true}
	}
	return realServerPool{main: PrivateRealServerMaxConns, visibility: PrivateRealServerVisibilityMaxConns}
}

// sharedPostgres reports whether pg (postgres://user@host:port, the script's PG) is the shared
// server: unset, or port 5432 (the default when none is given) on this machine. Anything else
// is a cluster a run started for itself. A URL that does not parse counts as shared: the
// smaller pools are the safe side.
func sharedPostgres(pg string) bool {
	if pg == "" {
		return true
	}
	u, err := url.Parse(pg)
	if err != nil {
		return true
	}
	switch u.Hostname() {
	case "127.0.0.1", "localhost", "::1", "":
	default:
		return false
	}
	return cmp.Or(u.Port(), "5432") == "5432"
}

// realServerSlot admits one real server per test process at a time.
var realServerSlot = make(chan struct{}, 1)

// StartRealServer starts a real Temporal server for the test on fresh databases (built first and
// cached outside the repository if the cache is empty, which takes minutes; `make test` builds
// it before the tests run) and stops it when the test ends. A server that cannot be had fails
// the test, or skips it under -short.
func StartRealServer(t testing.TB) *RealServer {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the real Temporal server test")
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "temporal-server.sh")
	// One real server at a time: each holds up to RealServerConns connections of the shared
	// PostgreSQL (max_connections 100 on a new machine), and two beside the other tests' pools
	// ran it out ("too many clients" in .ci/run). One at a time is also what lets its test wait
	// for more of the budget while holding some (connClaim).
	waited := time.Now()
	realServerSlot <- struct{}{}
	t.Cleanup(func() { <-realServerSlot })
	if d := time.Since(waited); d > time.Second {
		t.Logf("waited %s for another test's real Temporal server to stop", d.Round(time.Second))
	}
	pool := realServerPoolFor(os.Getenv("PG"))
	if pool.shared {
		claimRealServer(t, RealServerConns)
	} else {
		t.Logf("real Temporal server on a private PostgreSQL cluster: %d main + %d visibility connections per service, outside the shared server's budget",
			pool.main, pool.visibility)
	}
	port, err := membershipSafePort()
	Need(t, "a port for a real Temporal server", err)
	s := &RealServer{state: t.TempDir(), port: port, script: script, pool: pool}
	start := time.Now()
	out, err := s.run("start")
	if err != nil {
		// A server that never became healthy is still running: stop it with its pid file.
		_, _ = s.run("remove")
	}
	Need(t, "a real Temporal server (scripts/temporal-server.sh start)", errWithOutput(err, out))
	s.Address = strings.TrimSpace(lastLine(out))
	// Its two databases go with it: the PostgreSQL is shared, and every run would leave a pair.
	t.Cleanup(func() { _, _ = s.run("remove") })
	t.Logf("real Temporal server on %s ready in %s", s.Address, time.Since(start).Round(time.Millisecond))
	return s
}

// Stop stops the server and keeps its databases (an outage; Restart ends it).
func (s *RealServer) Stop() error {
	out, err := s.run("stop")
	return errWithOutput(err, out)
}

// Restart starts the stopped server again on the same databases, and returns once it answers.
func (s *RealServer) Restart() error {
	out, err := s.run("restart")
	return errWithOutput(err, out)
}

func (s *RealServer) run(cmd string) (string, error) {
	c := exec.Command(s.script, cmd)
	c.Env = append(os.Environ(), "TEMPORAL_SERVER_PORT="+s.port, "TEMPORAL_SERVER_STATE="+s.state,
		"TEMPORAL_SERVER_MAX_CONNS="+strconv.Itoa(s.pool.main),
		"TEMPORAL_SERVER_VISIBILITY_MAX_CONNS="+strconv.Itoa(s.pool.visibility))
	out, err := c.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out) + string(ee.Stderr), err
	}
	return string(out), err
}

// membershipSafePort finds a frontend port whose three neighbours (history, matching, worker)
// and membership ports (+100..+103) are free and below 32768, where the server stores them, and
// reserves the eight for this process (a real server is stopped and restarted on them).
func membershipSafePort() (string, error) {
	base, span := 20000, 12000
	if lo, hi, own, err := ownPortRange(); err != nil {
		return "", err
	} else if own {
		if hi-103 < lo || hi >= 32768 {
			return "", fmt.Errorf("MAILHOOK_TEST_PORTS %d-%d: a real server needs 104 ports below 32768", lo, hi)
		}
		base, span = lo, hi-103-lo+1
	}
	// Every frontend port in turn, in a random order: in a small range, many of whose ports the
	// process has given out, a few random tries may all miss.
	for _, i := range rand.Perm(span) {
		p := base + i
		if reserveAll([]int{p, p + 1, p + 2, p + 3, p + 100, p + 101, p + 102, p + 103}) {
			return fmt.Sprint(p), nil
		}
	}
	return "", fmt.Errorf("no free range of a real server's ports in %d-%d", base, base+span+102)
}

// reserveAll reserves every port of ports (FreeHostPort's reserve), each free now, or none.
func reserveAll(ports []int) bool {
	for i, q := range ports {
		if !free(q) || !reserve(q) {
			for _, r := range ports[:i] {
				unreserve(r)
			}
			return false
		}
	}
	return true
}

func errWithOutput(err error, out string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w\n%s", err, out)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
