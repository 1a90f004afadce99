// Package mailaddr turns what a provider or a caller writes as an email address into the one key
// mailhook suppresses, counts and erases it under, and finds the addresses a bounce's text names.
//
// It is pure, and it is the only normalization: every provider's recipient, the suppression
// check, the lists and erasure go through Key, so "Jane Doe <Jane@X.com>", "<jane@x.com>" and
// "jane@x.com." are one address (docs/PROVIDERS.md "Recipients and suppression keys").
package mailaddr

import (
	"net/mail"
	"slices"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"
)

// Key is the suppression key of one address, the form mail systems compare it in:
//
//   - the addr-spec of s as RFC 5322 reads it (a display name, angle brackets and a comment
//     dropped, a quoted local part unquoted), without a trailing dot on its domain;
//   - the whole address in Unicode NFC, so a decomposed "bu\u0308cher" and a composed "bücher",
//     or U+212A KELVIN SIGN and K, are one spelling, as canonically equivalent text is one text;
//   - the domain through IDNA (UTS #46 mapping, non-transitional) to its ASCII form: "Bücher.example"
//     and "xn--bcher-kva.example" are one domain, as DNS resolves them to one;
//   - in the local part, only ASCII letters lower-cased. Every mailbox provider treats those
//     case-insensitively, so "Jane" and "jane" are one key. No standard makes the case of other
//     letters insignificant (RFC 6531 leaves the local part to the receiving server), and Unicode
//     case mapping merges what may be two mailboxes: Go's lower-casing maps İ (U+0130) to ASCII i,
//     so a bounce recorded for İvan@x would suppress ivan@x. They are kept as written (after NFC).
//
// The mapping is Go's and x/net/idna's, the same on every machine, never the database's locale.
// A string that does not parse as one address gets the same treatment around its last "@"
// (or, without one, NFC and ASCII lower-casing): what is not an address still has a stable key,
// and nothing is lost.
func Key(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if a, err := mail.ParseAddress(trimDot(s)); err == nil {
		s = a.Address
	}
	s = norm.NFC.String(trimDot(s))
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return lowerASCII(s)
	}
	return lowerASCII(s[:at]) + "@" + domainKey(s[at+1:])
}

// domains maps a domain as a mail system looking it up does (UTS #46, non-transitional: ß stays
// ß, as IDNA2008 and every current browser and MTA read it), without refusing what DNS host
// names may not hold but mail domains in the wild do ("_" in a label, a leading hyphen).
var domains = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.StrictDomainName(false),
	idna.ValidateLabels(false), idna.CheckHyphens(false), idna.CheckJoiners(false))

// domainKey is a domain's ASCII form, or, when IDNA refuses it (a label that is not valid
// punycode), the domain with its ASCII letters lower-cased: still stable, never an error.
func domainKey(d string) string {
	if a, err := domains.ToASCII(d); err == nil && a != "" {
		return a
	}
	return lowerASCII(d)
}

// lowerASCII lower-cases the ASCII letters of s and nothing else.
func lowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// trimDot drops the dots that end a domain ("jane@x.com." names jane@x.com, as DNS does), also
// inside angle brackets.
func trimDot(s string) string {
	if rest, ok := strings.CutSuffix(s, ">"); ok {
		return strings.TrimRight(rest, ".") + ">"
	}
	return strings.TrimRight(s, ".")
}

// List is the keys of every address in s, which may be one address or a header's list of them
// (`a@x.com, "B" <b@y.com>`), in order, without repeats. A string that is not such a list is
// one key (Key's), or none when it is blank.
func List(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	if as, err := mail.ParseAddressList(s); err == nil && len(as) > 1 {
		keys := make([]string, 0, len(as))
		for _, a := range as {
			keys = appendNew(keys, Key(a.Address))
		}
		return keys
	}
	return []string{Key(s)}
}

// Named returns the one of candidates (keys) that text names, as a DSN's or an SMTP reply's text
// names the recipient it is about ("550 5.1.1 <b@y.com>: Recipient address rejected"), and false
// when it names none of them or more than one: then the text does not say whose bounce it is.
func Named(text string, candidates []string) (string, bool) {
	named := ""
	for _, m := range mentioned(text) {
		for _, c := range candidates {
			if c != "" && m == c && named != c {
				if named != "" {
					return "", false
				}
				named = c
			}
		}
	}
	return named, named != ""
}

// mentioned is the keys of the address-like words of text: each run of characters around an
// "@" up to a space, a bracket, a quote or a separator.
func mentioned(text string) []string {
	var keys []string
	for i := 0; i < len(text); i++ {
		if text[i] != '@' {
			continue
		}
		start := i
		for start > 0 && !stops(text[start-1]) {
			start--
		}
		end := i + 1
		for end < len(text) && !stops(text[end]) {
			end++
		}
		if start < i && end > i+1 {
			keys = appendNew(keys, Key(text[start:end]))
		}
		i = end - 1
	}
	return keys
}

func stops(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '<', '>', '(', ')', '[', ']', '"', '\'', ',', ';', ':':
		return true
	}
	return false
}

func appendNew(keys []string, k string) []string {
	for _, have := range keys {
		if have == k {
			return keys
		}
	}
	return append(keys, k)
}

// Spellings are the spellings of the mailbox a key names that text may hold, each once: the key
// itself, with its domain in ASCII and in Unicode when those differ, and each of them
// decomposed (NFD). Text
// that mentions the mailbox in another case of its ASCII letters is found by a case-insensitive
// match of one of them (erasure.Matcher).
func Spellings(key string) []string {
	out := []string{key}
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if at := strings.LastIndexByte(key, '@'); at >= 0 {
		// Both forms whichever key was given: an erasure started by a version before issue 41
		// holds its key with the domain as written.
		add(key[:at] + "@" + domainKey(key[at+1:]))
		if u, err := domains.ToUnicode(key[at+1:]); err == nil {
			add(key[:at] + "@" + u)
		}
	}
	for _, s := range slices.Clone(out) {
		add(norm.NFD.String(s))
	}
	return out
}
