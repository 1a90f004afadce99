package loadgen

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// The checks' expected answers follow from the generated data: fillSQL and benchAddress and
// benchScope must describe the same rows, or every "wrong answer" would be the generator's.
func TestNextCheckAgreesWithTheFill(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 1000
	hits := 0
	for range 10_000 {
		c := nextCheck(r, n, 0.5)
		addr := strings.ToLower(c.address)
		i, err := strconv.Atoi(strings.TrimPrefix(addr[:strings.IndexByte(addr, '@')], "user"))
		generated := err == nil && i >= 1 && i <= n && addr == benchAddress(i)
		if !generated {
			if c.want {
				t.Fatalf("%+v: a hit on an address the fill never writes", c)
			}
			continue
		}
		stored := benchScope(i)
		suppressed := stored == "global" || stored == c.scope
		if suppressed != c.want {
			t.Fatalf("%+v: row %d is in %s, so suppressed is %v", c, i, stored, suppressed)
		}
		if c.want {
			hits++
		}
	}
	if hits < 4500 || hits > 5500 {
		t.Errorf("%d hits of 10000 at a 0.5 share", hits)
	}
	// The SQL's expressions, spelled out for one row of each scope.
	for i, want := range map[int]string{10: "marketing", 11: "transactional", 12: "global"} {
		if benchScope(i) != want || benchAddress(i) != "user"+strconv.Itoa(i)+"@d"+strconv.Itoa(i%997)+".bench.example" {
			t.Errorf("row %d: %s %s", i, benchAddress(i), benchScope(i))
		}
	}
	if !strings.Contains(fillSQL, "'user' || i || '@d' || (i % 997) || '.bench.example'") ||
		!strings.Contains(fillSQL, "CASE i % 5 WHEN 0 THEN 'marketing' WHEN 1 THEN 'transactional' ELSE '' END") {
		t.Error("fillSQL no longer writes what benchAddress and benchScope describe")
	}
}
