package allowlist

import "testing"

func TestAllows(t *testing.T) {
	l, err := Parse("p", []string{"10.0.0.0/8", "192.0.2.7", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]bool{
		"10.1.2.3": true, "192.0.2.7": true, "192.0.2.8": false, "::ffff:10.0.0.1": true,
		"2001:db8::1": true, "2001:db9::1": false, "": false, "garbage": false,
	} {
		if got := l.Allows(ip); got != want {
			t.Errorf("Allows(%q) = %v, want %v", ip, got, want)
		}
	}
	if !(List(nil)).Allows("203.0.113.1") {
		t.Error("an empty list allows everything")
	}
	if _, err := Parse("postmark", []string{"10.0.0.0/8", "nope"}); err == nil || err.Error() != `postmark: allow_cidrs[1] "nope" is not a CIDR or an IP address` {
		t.Errorf("Parse error %v", err)
	}
}
