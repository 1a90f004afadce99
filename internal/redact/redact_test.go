package redact

import (
	"strings"
	"testing"
)

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

// A diagnostic keeps what the server said and loses whom it was about; a long one is cut short.
func TestDiagnostic(t *testing.T) {
	for in, want := range map[string]string{
		"550 5.1.1 <jane.doe@example.com>: Recipient address rejected":       "550 5.1.1 <j***@example.com>: Recipient address rejected",
		"452 4.2.2 Mailbox full (to: bob@corp.example, cc ann@corp.example)": "452 4.2.2 Mailbox full (to: b***@corp.example, cc a***@corp.example)",
		"554\n  5.7.1   rejected as spam":                                    "554 5.7.1 rejected as spam",
		"":                                                                   "",
	} {
		if got := Diagnostic(in); got != want {
			t.Errorf("Diagnostic(%q) = %q, want %q", in, got, want)
		}
	}
	long := Diagnostic("550 " + strings.Repeat("x", 300) + " jane@example.com")
	if n := len([]rune(long)); n != DiagnosticRunes || !strings.HasSuffix(long, "…") || strings.Contains(long, "jane") {
		t.Errorf("a long diagnostic: %d runes %q", n, long)
	}
}
