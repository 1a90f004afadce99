package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
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
	for range 200 {
		p := 0
		switch {
		case own:
			p = ownLo + rand.IntN(ownHi-ownLo+1)
		case lo > 12000:
			// Below the range, above the commonly configured ports, and below 20000, where
			// membershipSafePort places the real server's.
			p = 10000 + rand.IntN(min(lo, 20000)-10000)
		case hi < 64000:
			p = hi + 1 + rand.IntN(65535-hi)
		default:
			return listenAny()
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		return ln.Addr().String(), nil
	}
	return "", fmt.Errorf("no free port outside the ephemeral range %d-%d after 200 tries", lo, hi)
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
