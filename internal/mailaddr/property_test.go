package mailaddr_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"

	"github.com/mailhook/mailhook/internal/mailaddr"
)

// A mailbox as mail systems tell mailboxes apart: its local part with ASCII letters lower-cased
// and every other character composed (NFC), and its domain's labels in their lower-case Unicode
// form. Two mailboxes are the same exactly when these are equal.
type mailbox struct {
	local  []rune
	labels []string
}

func (m mailbox) id() string { return string(m.local) + "@" + strings.Join(m.labels, ".") }

var (
	// Letters beyond ASCII, both cases of several, and the pairs Unicode lower-casing merges
	// (İ and i, ı and I, ẞ and ß, Σ and σ and ς): no standard says they are one mailbox.
	localLetters = []rune("öÖéÉßẞİıåÅñÑюЮσςΣ")
	asciiLetters = []rune("abcdefghijklmnopqrstuvwxyz")
	// Domain letters (UTS #46 lower-cases domains, so only lower case is a mailbox's own form).
	domainLetters = []rune("abcdefghijklmnopqrstuvwxyzüöéñя")
)

func genMailbox(r *rand.Rand) mailbox {
	var local []rune
	for seg := range 1 + r.IntN(3) {
		if seg > 0 {
			local = append(local, []rune(".+-")[r.IntN(3)])
		}
		for range 1 + r.IntN(5) {
			switch r.IntN(3) {
			case 0:
				local = append(local, localLetters[r.IntN(len(localLetters))])
			case 1:
				local = append(local, rune('0'+r.IntN(10)))
			default:
				local = append(local, asciiLetters[r.IntN(len(asciiLetters))])
			}
		}
	}
	labels := []string{}
	for range 1 + r.IntN(2) {
		var l []rune
		for range 1 + r.IntN(6) {
			l = append(l, domainLetters[r.IntN(len(domainLetters))])
		}
		labels = append(labels, string(l))
	}
	return mailbox{local: local, labels: append(labels, "example")}
}

// spell writes m as a sender, a provider or an operator may: ASCII letters in either case, a
// composed letter decomposed (NFD), K as U+212A KELVIN SIGN and Å as U+212B ANGSTROM SIGN
// (canonically equivalent), the local part quoted, domain labels in upper case, decomposed or
// in their ASCII (punycode) form, a trailing dot, a display name around it.
func spell(r *rand.Rand, m mailbox) string {
	var local strings.Builder
	for _, c := range m.local {
		switch {
		case c == 'k' && r.IntN(3) == 0:
			local.WriteRune('\u212A')
		case c == 'Å' && r.IntN(2) == 0:
			local.WriteRune('\u212B')
		case c < 0x80 && r.IntN(2) == 0:
			local.WriteString(strings.ToUpper(string(c)))
		case c >= 0x80 && r.IntN(2) == 0:
			local.WriteString(norm.NFD.String(string(c)))
		default:
			local.WriteRune(c)
		}
	}
	labels := make([]string, len(m.labels))
	for i, l := range m.labels {
		switch r.IntN(4) {
		case 0:
			a, err := idna.Lookup.ToASCII(l)
			if err != nil {
				panic(err)
			}
			labels[i] = a
		case 1:
			labels[i] = strings.ToUpper(l)
		case 2:
			labels[i] = norm.NFD.String(l)
		default:
			labels[i] = l
		}
	}
	addr := local.String()
	if r.IntN(4) == 0 {
		addr = `"` + addr + `"`
	}
	addr += "@" + strings.Join(labels, ".")
	if r.IntN(4) == 0 {
		addr += "."
	}
	switch r.IntN(4) {
	case 0:
		return "<" + addr + ">"
	case 1:
		return "Some One <" + addr + ">"
	}
	return addr
}

// twin is a mailbox that differs from m only in what mail systems do not fold: the case of one
// letter beyond ASCII, or İ/ı written for i/I.
func twin(r *rand.Rand, m mailbox) (mailbox, bool) {
	swaps := map[rune]rune{'ö': 'Ö', 'Ö': 'ö', 'é': 'É', 'É': 'é', 'ß': 'ẞ', 'ẞ': 'ß', 'İ': 'i', 'ı': 'i',
		'å': 'Å', 'Å': 'å', 'ñ': 'Ñ', 'Ñ': 'ñ', 'ю': 'Ю', 'Ю': 'ю', 'σ': 'Σ', 'ς': 'σ', 'Σ': 'ς', 'i': 'İ'}
	start := r.IntN(len(m.local))
	for j := range m.local {
		i := (start + j) % len(m.local)
		if to, ok := swaps[m.local[i]]; ok {
			local := append([]rune(nil), m.local...)
			local[i] = to
			return mailbox{local: local, labels: m.labels}, true
		}
	}
	return mailbox{}, false
}

// Every spelling of one mailbox has one key; two mailboxes never share one (issue 41).
func TestOneMailboxOneKeyTwoMailboxesTwoKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 2026))
	owner := map[string]string{} // key -> mailbox id
	check := func(m mailbox) {
		t.Helper()
		key := ""
		for range 6 {
			s := spell(r, m)
			k := mailaddr.Key(s)
			if key == "" {
				key = k
			} else if k != key {
				t.Fatalf("mailbox %q: spelling %q has key %q, another had %q", m.id(), s, k, key)
			}
			if mailaddr.Key(k) != k {
				t.Fatalf("Key is not idempotent on %q", k)
			}
		}
		if prev, ok := owner[key]; ok && prev != m.id() {
			t.Fatalf("mailboxes %q and %q share the key %q", prev, m.id(), key)
		}
		owner[key] = m.id()
	}
	twins := 0
	for range 5000 {
		m := genMailbox(r)
		check(m)
		if tw, ok := twin(r, m); ok {
			twins++
			check(tw)
		}
	}
	if twins < 1000 {
		t.Fatalf("only %d twins: the generator does not test what it is meant to", twins)
	}
}

// The cases the fourth review found, by name.
func TestKeyMergesEquivalentSpellingsAndNothingElse(t *testing.T) {
	same := [][]string{
		{"user@bücher.example", "user@xn--bcher-kva.example", "user@bu\u0308cher.example", "USER@BÜCHER.EXAMPLE."},
		{"kate@x.com", "\u212Aate@x.com", "Kate@X.com"},
		{"jörg@x.de", "jo\u0308rg@x.de"},
	}
	for _, spellings := range same {
		for _, s := range spellings[1:] {
			if a, b := mailaddr.Key(spellings[0]), mailaddr.Key(s); a != b {
				t.Errorf("%q and %q are one mailbox, keys %q and %q", spellings[0], s, a, b)
			}
		}
	}
	for _, pair := range [][2]string{
		{"\u0130van.x@example.com", "ivan.x@example.com"},
		{"\u0131van@example.com", "Ivan@example.com"},
		{"jörg@x.de", "jÖrg@x.de"},
		{"straße@x.de", "strasse@x.de"},
		{"a@faß.de", "a@fass.de"},
	} {
		if a, b := mailaddr.Key(pair[0]), mailaddr.Key(pair[1]); a == b {
			t.Errorf("%q and %q may be two mailboxes, both keyed %q", pair[0], pair[1], a)
		}
	}
}
