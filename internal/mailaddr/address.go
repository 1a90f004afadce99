// Package mailaddr turns what a provider or a caller writes as an email address into the one key
// mailhook suppresses, counts and erases it under, and finds the addresses a bounce's text names.
//
// It is pure, and it is the only normalization: every provider's recipient, the suppression
// check, the lists and erasure go through Key, so "Jane Doe <Jane@X.com>", "<jane@x.com>" and
// "jane@x.com." are one address (docs/PROVIDERS.md "Recipients and suppression keys").
package mailaddr

import (
	"net/mail"
	"strings"
)

// Key is the suppression key of one address: the addr-spec of s as RFC 5322 reads it (a display
// name, angle brackets and a comment dropped, a quoted local part unquoted), without a trailing
// dot on its domain, lower-cased. Lower-casing is Go's Unicode case mapping, the same on every
// machine, never the database's locale. A string that does not parse as one address is only
// trimmed and lower-cased: what is not an address still has a stable key, and nothing is lost.
func Key(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if a, err := mail.ParseAddress(trimDot(s)); err == nil {
		s = a.Address
	}
	return strings.ToLower(trimDot(s))
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
