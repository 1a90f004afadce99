// Package redact keeps personal data out of logs and errors: an email address becomes its first
// character and its domain (j***@example.com). Enough to tell a bounce at gmail.com from one at
// a customer's domain while reading logs; the full address is in PostgreSQL, behind the admin API.
package redact

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
)

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

// Text stands in for free text written by an operator or a downstream (a correction's reason, a
// lift's note, a sink's answer): "47 chars, sha256 1f2e3d4c". Such text may name anyone, so a log
// never carries it; the length and a short hash let a reader match a log line to the stored row
// (sha256 of the text, in PostgreSQL: encode(sha256(convert_to(reason, 'UTF8')), 'hex')).
func Text(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return strconv.Itoa(len([]rune(s))) + " chars, sha256 " + hex.EncodeToString(sum[:4])
}

// addressInText is an address inside free text: "<jane@example.com>", "to jane@example.com;".
var addressInText = regexp.MustCompile(`[^\s<>()\[\]"',;:]+@[^\s<>()\[\]"',;:]+`)

// DiagnosticRunes is how much of a diagnostic Diagnostic keeps.
const DiagnosticRunes = 120

// Diagnostic shortens a remote server's diagnostic ("550 5.1.1 <jane@example.com>: no such
// user") for a log line or a workflow result: every address in it masked as Address masks one,
// then cut to DiagnosticRunes runes with "…". What the server said stays readable; whom it was
// about does not. The whole text is in PostgreSQL, behind the admin API.
func Diagnostic(s string) string {
	s = addressInText.ReplaceAllStringFunc(strings.Join(strings.Fields(s), " "), Address)
	if r := []rune(s); len(r) > DiagnosticRunes {
		s = string(r[:DiagnosticRunes-1]) + "…"
	}
	return s
}
