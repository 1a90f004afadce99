package testenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

func TestFreeHostPortIsOutsideTheEphemeralRange(t *testing.T) {
	t.Setenv("MAILHOOK_TEST_PORTS", "")
	ownLocks(t)
	lo, hi := ephemeralRange()
	for range 50 {
		hp := FreeHostPort(t)
		_, ps, err := net.SplitHostPort(hp)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(ps)
		if p >= lo && p <= hi {
			t.Fatalf("FreeHostPort gave %s, inside the ephemeral range %d-%d where an outgoing connection may take it", hp, lo, hi)
		}
		ln, err := net.Listen("tcp", hp)
		if err != nil {
			t.Fatalf("FreeHostPort gave %s, which is not free: %v", hp, err)
		}
		ln.Close()
	}
}

func TestPortsStayInMailhookTestPorts(t *testing.T) {
	lo, hi := testPorts(t, 200)
	ownLocks(t)
	for range 50 {
		_, ps, _ := net.SplitHostPort(FreeHostPort(t))
		if p, _ := strconv.Atoi(ps); p < lo || p > hi {
			t.Fatalf("FreeHostPort gave port %d, outside MAILHOOK_TEST_PORTS %d-%d", p, lo, hi)
		}
	}
	ownLocks(t)
	for range 5 {
		ps, err := membershipSafePort()
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := strconv.Atoi(ps); p < lo || p+103 > hi {
			t.Fatalf("membershipSafePort gave %d, whose ports reach outside %d-%d", p, lo, hi)
		}
	}
	t.Setenv("MAILHOOK_TEST_PORTS", strconv.Itoa(lo))
	if _, err := freeHostPort(); err == nil {
		t.Fatalf("MAILHOOK_TEST_PORTS=%d (no range) was accepted", lo)
	}
}

// A port given to one test is not given to another while its server is stopped (nothing listens
// on it then): not in this process, and not in another that shares the lock directory (a second
// open of a lock file conflicts as another process's would). The suite's other test processes
// listen on ports of the same range meanwhile, which FreeHostPort rightly skips: the test takes
// ports where nothing listens, and a repeat is a defect only while a port of its range was still
// free and not given (when none is, FreeHostPort gives a port that is free but reserved, by
// design). Beside a second make test, 20 ports of 20 failed as soon as one server of another
// package listened on one of them.
func TestFreeHostPortGivesAPortOnce(t *testing.T) {
	base, _ := testPorts(t, 108)
	lo, hi := setPorts(t, quietPorts(base, 108, 20), 20)
	ownLocks(t)
	given := map[string]bool{}
	for range 20 {
		hp := FreeHostPort(t)
		if given[hp] {
			if p := freeNotGiven(lo, hi, given); p != 0 {
				t.Fatalf("FreeHostPort gave %s twice in %d-%d (after %d ports) while %d was free and not given", hp, lo, hi, len(given), p)
			}
			t.Logf("after %d ports every other port of %d-%d had a server of another test: FreeHostPort fell back to a reserved one, as documented", len(given), lo, hi)
			break
		}
		given[hp] = true
	}

	// Another process's ports: FreeHostPort gives the third port of three. A server another test
	// starts on that port meanwhile makes the fallback right; the test then tries three others.
	for try := 0; ; try++ {
		off := try * 3
		lo, hi = setPorts(t, quietPorts(base+off, 108-off, 3), 3)
		ownLocks(t)
		for _, p := range []int{lo, lo + 1} {
			f, err := os.OpenFile(filepath.Join(portLocks, strconv.Itoa(p)), os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatal(err)
			}
		}
		hp, want := FreeHostPort(t), fmt.Sprintf("127.0.0.1:%d", hi)
		if hp == want {
			break
		}
		if free(hi) || try == 4 {
			t.Fatalf("FreeHostPort gave %s while another process holds %d and %d; want %s", hp, lo, lo+1, want)
		}
	}

	// A real server's eight ports are its own too.
	lo, hi = setPorts(t, base, 108)
	ownLocks(t)
	ps, err := membershipSafePort()
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(ps)
	theirs := map[int]bool{p: true, p + 1: true, p + 2: true, p + 3: true, p + 100: true, p + 101: true, p + 102: true, p + 103: true}
	// Fewer than the 100 other ports of the range: the suite's other tests may listen on some
	// (when all are taken, FreeHostPort falls back to a port that is free but reserved).
	for range 30 {
		_, qs, _ := net.SplitHostPort(FreeHostPort(t))
		if q, _ := strconv.Atoi(qs); theirs[q] {
			t.Fatalf("FreeHostPort gave %d, one of the real server's ports (frontend %d)", q, p)
		}
	}
}

// testPorts sets MAILHOOK_TEST_PORTS to n ports of the suite's own range (the first n of it, or
// 22100 on when it has none: a suite beside another must probe only its own ports).
func testPorts(t *testing.T, n int) (lo, hi int) {
	t.Helper()
	lo = 22100
	if ownLo, ownHi, own, err := ownPortRange(); err != nil {
		t.Fatal(err)
	} else if own {
		if ownHi-ownLo+1 < n {
			t.Fatalf("MAILHOOK_TEST_PORTS %d-%d: this test needs %d ports", ownLo, ownHi, n)
		}
		lo = ownLo
	}
	return setPorts(t, lo, n)
}

// quietPorts is the first port from lo of n ports in a row where nothing listens now, within the
// size ports from lo (lo itself when there is none): the suite's other packages listen on ports
// of its range meanwhile.
func quietPorts(lo, size, n int) int {
	for from := lo; from+n <= lo+size; from++ {
		quiet := true
		for p := from; p < from+n && quiet; p++ {
			quiet = free(p)
		}
		if quiet {
			return from
		}
	}
	return lo
}

// freeNotGiven is a port of lo-hi where nothing listens that is not in given, or 0.
func freeNotGiven(lo, hi int, given map[string]bool) int {
	for p := lo; p <= hi; p++ {
		if !given[fmt.Sprintf("127.0.0.1:%d", p)] && free(p) {
			return p
		}
	}
	return 0
}

// setPorts sets MAILHOOK_TEST_PORTS to the n ports from lo.
func setPorts(t *testing.T, lo, n int) (int, int) {
	t.Setenv("MAILHOOK_TEST_PORTS", fmt.Sprintf("%d-%d", lo, lo+n-1))
	return lo, lo + n - 1
}

// ownLocks gives the test a lock directory and reservations of its own, so that what the
// process's other tests (or other processes) hold does not count, and what it takes is let go
// of when it ends.
func ownLocks(t *testing.T) {
	t.Helper()
	reservedMu.Lock()
	savedDir, savedReserved := portLocks, reserved
	portLocks, reserved = t.TempDir(), map[int]*os.File{}
	reservedMu.Unlock()
	t.Cleanup(func() {
		reservedMu.Lock()
		defer reservedMu.Unlock()
		for _, f := range reserved {
			f.Close()
		}
		portLocks, reserved = savedDir, savedReserved
	})
}

// A broker's start waits while its files grow (treeBytes is its progress), in any directory.
func TestTreeBytesGrowsWithWhatIsWritten(t *testing.T) {
	dir := t.TempDir()
	if n := treeBytes(dir); n != 0 {
		t.Fatalf("treeBytes of an empty directory = %d", n)
	}
	if err := os.MkdirAll(filepath.Join(dir, "mnesia", "node"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mnesia", "node", "schema.DAT"), make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server.log"), make([]byte, 10), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := treeBytes(dir); n != 110 {
		t.Fatalf("treeBytes = %d, want 110 (a file in a subdirectory and one beside it)", n)
	}
	if n := treeBytes(filepath.Join(dir, "server.log")); n != 10 {
		t.Fatalf("treeBytes of a file = %d, want 10", n)
	}
}
