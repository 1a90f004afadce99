package erasure

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mailhook/mailhook/internal/mailaddr"
)

// Placeholder replaces every mention of an erased address in text: it says that something was
// there, and holds nothing that links it to the address (no hash, no length).
const Placeholder = "[erased]"

// MaxAddressBytes is the longest address that can be erased: the longest recipient mailhook
// stores (store.Storable), so every stored address can be.
const MaxAddressBytes = 320

// ErrInvalidAddress is returned (wrapped) for what is not one email address. Its message never
// quotes the address.
var ErrInvalidAddress = errors.New("not one email address (local@domain)")

// Valid says why address (as the caller normalized it) cannot be erased, or nil: it must be one
// address, local@domain, with no spaces or control characters. Anything shorter would redact
// other people's data: erasing "example.com" would take every address at that domain.
func Valid(address string) error {
	at := strings.LastIndexByte(address, '@')
	switch {
	case len(address) > MaxAddressBytes:
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidAddress, MaxAddressBytes)
	case !utf8.ValidString(address):
		return fmt.Errorf("%w: invalid UTF-8", ErrInvalidAddress)
	case at <= 0 || at == len(address)-1:
		return ErrInvalidAddress
	case strings.IndexFunc(address, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return fmt.Errorf("%w: it holds spaces or control characters", ErrInvalidAddress)
	case IsHash(address):
		return fmt.Errorf("%w: already a hashed address", ErrInvalidAddress)
	}
	return nil
}

// Matcher finds one address in text, case-insensitively (Unicode simple case folding), as a
// whole address and in the forms a URL writes it (user%40example.com, with + as %2B), so
// an unsubscribe link or a click URL that carries it is caught too.
//
// A match counts only where the address stands alone: not preceded by a character of a local
// part (a letter, a digit, . _ + -) and not followed by one of a domain (a letter, a digit, - _,
// or a dot that goes on into a label). Erasing ann@example.com so leaves joann@example.com,
// ann@example.com.au and x.ann@example.com alone, while "Ann <ann@example.com>",
// mailto:ann@example.com, ann@example.com. (end of a sentence) and email=ann%40example.com&…
// are caught. A percent or quoted-printable escape just before it (%3C, =3C) counts as a
// separator. What it does not catch is in docs/operations/erasure.md ("What counts as a mention").
type Matcher struct {
	forms  []*regexp.Regexp
	likes  []string
	prior  PriorKeys // keys_legacy.go
	folded []string  // folded_legacy.go
}

// NewMatcher returns the Matcher of address (as the caller normalized it; Valid must accept it).
func NewMatcher(address string) (*Matcher, error) {
	if err := Valid(address); err != nil {
		return nil, err
	}
	m := &Matcher{folded: foldedKeys(address)}
	seen := map[string]bool{}
	for _, form := range spelledForms(address) {
		if seen[form] {
			continue
		}
		seen[form] = true
		m.forms = append(m.forms, regexp.MustCompile(`(?i)`+regexp.QuoteMeta(form)))
		m.likes = append(m.likes, likePattern(strings.ToLower(form)))
		// jsonb's text form escapes " and \: a candidate query over payload::text must look for
		// the escaped form of an address that holds one.
		if escaped := jsonEscaped(form); escaped != form {
			m.likes = append(m.likes, likePattern(strings.ToLower(escaped)))
		}
	}
	return m, nil
}

// spelledForms are forms of every spelling of address that is one mailbox with it
// (mailaddr.Spellings: its domain in Unicode and in ASCII, composed and decomposed).
func spelledForms(address string) []string {
	var out []string
	for _, sp := range mailaddr.Spellings(address) {
		out = append(out, forms(sp)...)
	}
	return out
}

// forms are the spellings of address that text may hold: as it is; URL-encoded as a query
// value (+ as %2B, @ as %40); with only its @ encoded, as a link builder that escapes no + writes
// it (user+tag%40example.com); and, for an address with a +, that + read back as a space by a
// form decoder (user tag@example.com, user tag%40example.com).
func forms(address string) []string {
	at := func(s string) string { return strings.ReplaceAll(s, "@", "%40") }
	out := []string{address, url.QueryEscape(address), at(address)}
	if strings.Contains(address, "+") {
		spaced := strings.ReplaceAll(address, "+", " ")
		out = append(out, spaced, at(spaced))
	}
	return out
}

// LikePatterns are lower-case LIKE patterns (PostgreSQL's default escape, \) that the lower-cased
// text of every value mentioning the address matches, among others: a candidate query selects
// rows with `lower(col) LIKE ANY(…)`, which is ILIKE's match, and Mentions, RedactText and
// RedactJSON decide. They are a superset because LIKE knows no boundaries.
func (m *Matcher) LikePatterns() []string { return append([]string(nil), m.likes...) }

// Mentions reports whether s mentions the address.
func (m *Matcher) Mentions(s string) bool {
	for _, re := range m.forms {
		if _, _, ok := find(re, s, 0); ok {
			return true
		}
	}
	return false
}

// RedactText replaces every mention of the address in s with Placeholder, and reports whether
// there was any.
func (m *Matcher) RedactText(s string) (string, bool) {
	changed := false
	for _, re := range m.forms {
		var b strings.Builder
		pos := 0
		for {
			start, end, ok := find(re, s, pos)
			if !ok {
				break
			}
			b.WriteString(s[pos:start])
			b.WriteString(Placeholder)
			pos = end
		}
		if pos > 0 {
			b.WriteString(s[pos:])
			s, changed = b.String(), true
		}
	}
	return s, changed
}

// find returns the first match of re in s at or after from that stands alone (see Matcher).
func find(re *regexp.Regexp, s string, from int) (start, end int, ok bool) {
	for from <= len(s) {
		loc := re.FindStringIndex(s[from:])
		if loc == nil {
			return 0, 0, false
		}
		start, end = from+loc[0], from+loc[1]
		if separatedBefore(s, start) && separatedAfter(s, end) {
			return start, end, true
		}
		// Not on its own: look again from the next character.
		_, size := utf8.DecodeRuneInString(s[start:])
		from = start + max(size, 1)
	}
	return 0, 0, false
}

func separatedBefore(s string, i int) bool {
	if i == 0 {
		return true
	}
	if i >= 3 && (s[i-3] == '%' || s[i-3] == '=') && isHex(s[i-2]) && isHex(s[i-1]) {
		return true // %3C or =3C: an escaped separator
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return !localPartRune(r)
}

func separatedAfter(s string, i int) bool {
	if i == len(s) {
		return true
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == '.' {
		next, _ := utf8.DecodeRuneInString(s[i+size:])
		return i+size == len(s) || !domainRune(next)
	}
	return !domainRune(r)
}

func localPartRune(r rune) bool {
	return r == '.' || r == '_' || r == '+' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

func domainRune(r rune) bool {
	return r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// likePattern is %s% with LIKE's wildcards and escape character in s escaped ("_" in an address
// must match only "_"), and each character beyond ASCII made "_", any one character: the column
// side is lower(), which folds only ASCII letters in a database whose locale is C, so "Ö" would
// stay "Ö" there and miss "ö". The pattern is so wider, never narrower, and the Go matcher,
// whose case folding is Unicode's on every machine, decides.
func likePattern(s string) string {
	var b strings.Builder
	b.WriteByte('%')
	for _, r := range s {
		switch {
		case r == '\\' || r == '%' || r == '_':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= utf8.RuneSelf:
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('%')
	return b.String()
}

// jsonEscaped is s as a JSON string's content, without the quotes and without HTML escaping,
// as PostgreSQL prints a jsonb string.
func jsonEscaped(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}
