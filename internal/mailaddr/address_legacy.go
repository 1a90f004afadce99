package mailaddr

import (
	"net/mail"
	"strings"
)

// LegacyKey is the key versions before migration 21 gave s: its addr-spec lower-cased with Go's
// Unicode case mapping, the domain as written (not NFC, not IDNA). Suppressions those versions
// wrote stay under such a key (re-keyed by migration 21 through Key, and marked folded), and
// their case is lost: a row under "ivan@x.com" may be a bounce to İvan@x.com. So a check of s
// also finds a folded row under Key(LegacyKey(s)), and an erased row of those versions under the
// hash of LegacyKey(s): every suppression written before the upgrade still suppresses what it
// suppressed (store.Suppressions).
//
// Remove it when no suppression row is folded (SELECT count(*) FROM suppressions WHERE folded):
// rows are kept until lifted or erased, so that is an operator's decision, not a date.
func LegacyKey(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if a, err := mail.ParseAddress(trimDot(s)); err == nil {
		s = a.Address
	}
	return strings.ToLower(trimDot(s))
}

// LegacyKeys are the keys versions before migration 21 may have given the address s was
// written as: LegacyKey of s as written and of s with its domain in Unicode (those versions
// kept a domain as the provider wrote it, most write it in Unicode), each once.
func LegacyKeys(s string) []string {
	out := []string{LegacyKey(s)}
	k := Key(s)
	if at := strings.LastIndexByte(k, '@'); at >= 0 {
		if u, err := domains.ToUnicode(k[at+1:]); err == nil {
			if l := LegacyKey(k[:at] + "@" + u); l != out[0] {
				out = append(out, l)
			}
		}
	}
	return out
}
