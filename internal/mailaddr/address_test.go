package mailaddr_test

import (
	"slices"
	"testing"

	"github.com/mailhook/mailhook/internal/mailaddr"
)

func TestKeyIsTheAddressWhateverItIsWrappedIn(t *testing.T) {
	for in, want := range map[string]string{
		"jane@x.com":                     "jane@x.com",
		"  Jane@X.COM ":                  "jane@x.com",
		`"Jane Doe" <jane@x.com>`:        "jane@x.com",
		"Jane Doe <Jane@X.com>":          "jane@x.com",
		"<jane@x.com>":                   "jane@x.com",
		"jane@x.com.":                    "jane@x.com",
		"Jane <jane@x.com.>":             "jane@x.com",
		"jane@x.com (Jane)":              "jane@x.com",
		"=?utf-8?q?J=C3=B6rg?= <J@X.de>": "j@x.de",
		"JÖRG@BÜCHER.DE":                 "jÖrg@xn--bcher-kva.de",
		"jörg@xn--BCHER-kva.de":          "jörg@xn--bcher-kva.de",
		"jo\u0308rg@bu\u0308cher.de":     "jörg@xn--bcher-kva.de",
		"\u212Aate@x.com":                "kate@x.com",
		"\u0130van@x.com":                "\u0130van@x.com",
		"a@XN--ZZ.example":               "a@xn--zz.example",
		`"odd local"@x.com`:              "odd local@x.com",
		// Not one address: kept, trimmed and lower-cased, so its key is still stable.
		"Not An Address":   "not an address",
		"a@x.com, b@y.com": "a@x.com, b@y.com",
		"":                 "",
		"   ":              "",
	} {
		if got := mailaddr.Key(in); got != want {
			t.Errorf("Key(%q) = %q, want %q", in, got, want)
		}
		if got := mailaddr.Key(mailaddr.Key(in)); got != mailaddr.Key(in) {
			t.Errorf("Key is not idempotent on %q: %q then %q", in, mailaddr.Key(in), got)
		}
	}
}

func TestListSplitsAHeadersList(t *testing.T) {
	for in, want := range map[string][]string{
		`a@x.com, "B" <B@y.com>`: {"a@x.com", "b@y.com"},
		"a@x.com, A@X.com":       {"a@x.com"},
		"Jane <jane@x.com>":      {"jane@x.com"},
		"odd, not a list":        {"odd, not a list"},
		" ":                      nil,
	} {
		if got := mailaddr.List(in); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNamedFindsTheRecipientADiagnosticIsAbout(t *testing.T) {
	to := []string{"first@x.com", "second@y.com"}
	for text, want := range map[string]string{
		"550 5.1.1 <second@y.com>: Recipient address rejected: User unknown": "second@y.com",
		"smtp; 550 5.1.1 <Second@Y.COM>... User unknown":                     "second@y.com",
		"Final-Recipient: rfc822;first@x.com":                                "first@x.com",
		"550 5.1.1 second@y.com. user unknown":                               "second@y.com",
		// Names neither, someone else, or both: it does not say whose bounce it is.
		"550 5.1.1 user unknown":                        "",
		"550 5.1.1 <third@z.com>: user unknown":         "",
		"550 <first@x.com> and <second@y.com> rejected": "",
		"550 5.1.1 <notsecond@y.com>: user unknown":     "",
		"550 5.1.1 <second@y.com.au>: user unknown":     "",
	} {
		got, ok := mailaddr.Named(text, to)
		if got != want || ok != (want != "") {
			t.Errorf("Named(%q) = %q, %v; want %q", text, got, ok, want)
		}
	}
}

func TestSpellingsAreEveryFormOfTheMailbox(t *testing.T) {
	want := []string{"jörg@xn--bcher-kva.de", "jörg@bücher.de", "jo\u0308rg@xn--bcher-kva.de", "jo\u0308rg@bu\u0308cher.de"}
	for _, key := range []string{"jörg@xn--bcher-kva.de", "jörg@bücher.de"} {
		got := mailaddr.Spellings(key)
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("Spellings(%q) = %q, want %q", key, got, want)
		}
	}
	if got := mailaddr.Spellings("ann@example.com"); !slices.Equal(got, []string{"ann@example.com"}) {
		t.Errorf("Spellings of an ASCII address = %q", got)
	}
}
