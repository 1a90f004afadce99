package redact

import "testing"

func TestAddress(t *testing.T) {
	for in, want := range map[string]string{
		"jane.doe+tag@example.com": "j***@example.com",
		" Bob@Example.COM ":        "B***@Example.COM",
		"\"a@b\"@example.org":      "\"***@example.org",
		"élodie@exemple.fr":        "é***@exemple.fr",
		"no-at-sign":               "***",
		"@example.com":             "***",
		"":                         "",
	} {
		if got := Address(in); got != want {
			t.Errorf("Address(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestText(t *testing.T) {
	reason := "customer jane@example.com confirmed receipt"
	// printf '%s' "$reason" | sha256sum | cut -c1-8
	if got, want := Text(reason), "43 chars, sha256 84875f12"; got != want {
		t.Fatalf("Text(%q) = %q, want %q", reason, got, want)
	}
	if Text("élodie") != "6 chars, sha256 "+Text("élodie")[len("6 chars, sha256 "):] {
		t.Fatalf("Text counts bytes, not characters: %q", Text("élodie"))
	}
	if Text("") != "" {
		t.Fatalf("Text(\"\") = %q", Text(""))
	}
}
