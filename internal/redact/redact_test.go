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
