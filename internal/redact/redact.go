// Package redact keeps personal data out of logs and errors: an email address becomes its first
// character and its domain (j***@example.com). Enough to tell a bounce at gmail.com from one at
// a customer's domain while reading logs; the full address is in PostgreSQL, behind the admin API.
package redact

import "strings"

// Address masks an email address. Text without an "@" is masked whole: it may still be an
// address (a local part alone, a malformed recipient).
func Address(a string) string {
	a = strings.TrimSpace(a)
	if a == "" {
		return ""
	}
	at := strings.LastIndexByte(a, '@')
	if at <= 0 {
		return "***"
	}
	first := a[:1]
	if a[0] >= 0x80 { // the first rune, not a broken byte of it
		first = string([]rune(a[:at])[0])
	}
	return first + "***" + a[at:]
}
