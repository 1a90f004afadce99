package erasure

import "testing"

// What an erasure takes from a person's event as an IP address, and what it leaves.
func TestRedactIPText(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.7":                             Placeholder,
		"client 203.0.113.7, Mail/1.0":            "client " + Placeholder + ", Mail/1.0",
		"2001:db8::7":                             Placeholder,
		"(2001:DB8:0:0:0:0:0:7)":                  "(" + Placeholder + ")",
		"::ffff:192.0.2.1":                        Placeholder,
		`{"ipAddress":"2001:db8::1","n":1}`:       `{"ipAddress":"` + Placeholder + `","n":1}`,
		"2026-12-06T10:32:33.936Z":                "2026-12-06T10:32:33.936Z", // a time of day
		"Fri, 11 Sep 2015 20:32:32 +0000":         "Fri, 11 Sep 2015 20:32:32 +0000",
		"version 1.2.3.4.5":                       "version 1.2.3.4.5", // not an address
		"999.1.1.1":                               "999.1.1.1",
		"00:1a:2b:3c:4d:5e":                       "00:1a:2b:3c:4d:5e", // a MAC address
		"std::string":                             "std::string",
		"::":                                      "::",
		"Received: from mx (198.51.100.2) by mx2": "Received: from mx (" + Placeholder + ") by mx2",
	} {
		got, changed := RedactIPText(in)
		if got != want || changed != (got != in) {
			t.Errorf("RedactIPText(%q) = %q, %v; want %q", in, got, changed, want)
		}
	}
}

// RedactEvent takes the engagement's IP with the recipient that is the address, and keeps the
// rest of the engagement; another person's event keeps its IP.
func TestRedactEventDropsTheEngagementIP(t *testing.T) {
	m, err := NewMatcher("jane@example.com")
	if err != nil {
		t.Fatal(err)
	}
	out, changed, err := m.RedactEvent([]byte(`{"recipient":"jane@example.com","engagement":{"ip":"203.0.113.7","user_agent":"Mail/1.0"}}`))
	if err != nil || !changed || string(out) != `{"engagement":{"user_agent":"Mail/1.0"}}` {
		t.Fatalf("jane's open: %s, %v, %v", out, changed, err)
	}
	out, _, err = m.RedactEvent([]byte(`{"recipient":"jane@example.com","engagement":{"ip":"203.0.113.7"}}`))
	if err != nil || string(out) != `{}` {
		t.Fatalf("jane's open with an IP only: %s, %v", out, err)
	}
	doc := `{"recipient":"bob@example.com","engagement":{"ip":"203.0.113.9"}}`
	out, changed, err = m.RedactEvent([]byte(doc))
	if err != nil || changed || string(out) != doc {
		t.Fatalf("bob's open: %s, %v, %v", out, changed, err)
	}
}
