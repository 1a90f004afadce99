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
