package testenv

import (
	"net"
	"strconv"
	"testing"
)

func TestFreeHostPortIsOutsideTheEphemeralRange(t *testing.T) {
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
	t.Setenv("MAILHOOK_TEST_PORTS", "22100-22299")
	for range 50 {
		_, ps, _ := net.SplitHostPort(FreeHostPort(t))
		if p, _ := strconv.Atoi(ps); p < 22100 || p > 22299 {
			t.Fatalf("FreeHostPort gave port %d, outside MAILHOOK_TEST_PORTS 22100-22299", p)
		}
		ps, err := membershipSafePort()
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := strconv.Atoi(ps); p < 22100 || p+103 > 22299 {
			t.Fatalf("membershipSafePort gave %d, whose ports reach outside 22100-22299", p)
		}
	}
	t.Setenv("MAILHOOK_TEST_PORTS", "22100")
	if _, err := freeHostPort(); err == nil {
		t.Fatal("MAILHOOK_TEST_PORTS=22100 (no range) was accepted")
	}
}
