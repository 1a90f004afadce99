package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// FreeHostPort returns a 127.0.0.1 address with a port free right now, chosen outside the
// kernel's ephemeral range. The tests stop servers and start them again on the same port; a port
// from the ephemeral range (what a bind to :0 gives) can meanwhile become the local end of any
// outgoing connection on the machine, and the restart then fails with "address already in use"
// (CI, 2026-12-03: TestProcessFaults' Temporal restart on 127.0.0.1:32793).
//
// MAILHOOK_TEST_PORTS=lo-hi confines it (and the real server's ports) to that range, so that a
// long run beside a CI stays out of the range the CI's tests draw from.
//
// A port it gives is kept for this process until it exits (reserve), so that no other test, of
// this package or of another running at once, is given a port whose server a test has stopped
// and will start again on it: in a range of a few hundred ports that happens (a second suite
// beside the first has one of its own).
func FreeHostPort(t testing.TB) string {
	t.Helper()
	hp, err := freeHostPort()
	if err != nil {
		t.Fatal(err)
	}
	return hp
}

func freeHostPort() (string, error) {
	lo, hi := ephemeralRange()
	ownLo, ownHi, own, err := ownPortRange()
	if err != nil {
		return "", err
	}
	var from, n int // the candidates: the n ports from from
	switch {
	case own:
		from, n = ownLo, ownHi-ownLo+1
	case lo > 12000:
		// Below the range, above the commonly configured ports, and below 20000, where
		// membershipSafePort places the real server's.
		from, n = 10000, min(lo, 20000)-10000
	case hi < 64000:
		from, n = hi+1, 65535-hi
	default:
		return listenAny()
	}
	order := rand.Perm(n)
	for _, i := range order {
		if p := from + i; free(p) && reserve(p) {
			return fmt.Sprintf("127.0.0.1:%d", p), nil
		}
	}
	// Every free port is reserved: a small MAILHOOK_TEST_PORTS range all given out in a long
	// run. A port free now is better than none.
	for _, i := range order {
		if p := from + i; free(p) {
			return fmt.Sprintf("127.0.0.1:%d", p), nil
		}
	}
	return "", fmt.Errorf("no free port in %d-%d", from, from+n-1)
}

// free reports whether nothing listens on 127.0.0.1:p now.
func free(p int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

var (
	reservedMu sync.Mutex
	reserved   = map[int]*os.File{} // a port's locked file, open until the process exits
	// portLocks is where reserve's lock files are: the processes that share a TMPDIR (a suite's
	// packages) share them. Suites beside each other keep apart by MAILHOOK_TEST_PORTS.
	portLocks = filepath.Join(os.TempDir(), "mailhook-test-ports")
)

// reserve takes port p for this process, until it exits, and reports whether it could: a port
// a test was given stays its own while its server is stopped (a restart, an outage), when the
// probe alone would find it free. An flock on a file per port does it across test processes
// (go test runs packages at once, and a second suite may run beside) and is let go of by the
// kernel when the process ends, however it ends; a second open of the file in this process
// conflicts as another process's would. Without the lock directory there is only the probe.
func reserve(p int) bool {
	reservedMu.Lock()
	defer reservedMu.Unlock()
	if _, ok := reserved[p]; ok {
		return false
	}
	if err := os.MkdirAll(portLocks, 0o755); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(portLocks, strconv.Itoa(p)), os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	reserved[p] = f
	return true
}

// unreserve lets go of a port reserve took, for a set of ports taken together that could not
// all be had.
func unreserve(p int) {
	reservedMu.Lock()
	defer reservedMu.Unlock()
	if f, ok := reserved[p]; ok {
		f.Close()
		delete(reserved, p)
	}
}

// ownPortRange reads MAILHOOK_TEST_PORTS (lo-hi); own is false when it is not set.
func ownPortRange() (lo, hi int, own bool, err error) {
	v := os.Getenv("MAILHOOK_TEST_PORTS")
	if v == "" {
		return 0, 0, false, nil
	}
	if n, _ := fmt.Sscanf(v, "%d-%d", &lo, &hi); n != 2 || lo < 1024 || hi < lo || hi > 65535 {
		return 0, 0, false, fmt.Errorf("MAILHOOK_TEST_PORTS=%q: want lo-hi, 1024 <= lo <= hi <= 65535", v)
	}
	return lo, hi, true, nil
}

// ephemeralRange is the kernel's range for outgoing connections' local ports (Linux's default
// when it cannot be read).
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var l, h int
		if n, _ := fmt.Sscan(string(b), &l, &h); n == 2 && l > 0 && h >= l {
			lo, hi = l, h
		}
	}
	return lo, hi
}

func listenAny() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
