package erasure

import (
	"net/netip"
	"regexp"
	"strings"
)

// An open, a click or an unsubscribe carries the client's IP address (domain.Engagement.IP, and
// the provider's own JSON: Postmark's Geo.IP, SES's ipAddress, Mailgun's ip …). Once the event
// is known to be the erased person's (its recipient is the address), that IP is theirs too: it
// goes with the address. An IP address alone does not say whose it is, so nothing else is
// searched for IPs.

// ipCandidate finds what may be an IPv4 or IPv6 literal in text; RedactIPs keeps only what
// netip parses (a time of day like 20:32:33 does not).
var ipCandidate = regexp.MustCompile(`[0-9A-Fa-f]*:[0-9A-Fa-f:.]*[0-9A-Fa-f]|\d{1,3}(?:\.\d{1,3}){3}`)

// RedactIPText replaces every IP address literal in s with Placeholder, and reports whether it
// replaced any. A literal inside a longer run of digits and dots (a version 1.2.3.4.5) is not
// one.
func RedactIPText(s string) (string, bool) {
	idx := ipCandidate.FindAllStringIndex(s, -1)
	if idx == nil {
		return s, false
	}
	var b strings.Builder
	last, changed := 0, false
	for _, loc := range idx {
		lit := s[loc[0]:loc[1]]
		if !isIPLiteral(lit) || loc[0] > 0 && ipRun(s[loc[0]-1]) || loc[1] < len(s) && ipRun(s[loc[1]]) {
			continue
		}
		b.WriteString(s[last:loc[0]])
		b.WriteString(Placeholder)
		last, changed = loc[1], true
	}
	if !changed {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

func isIPLiteral(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && !a.IsUnspecified()
}

// ipRun: a byte that would make a literal part of a longer token (1.2.3.4.5, 10.0.0.1a).
func ipRun(c byte) bool {
	return c == '.' || c == ':' || c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// RedactIPs is RedactJSON for IP addresses: every IP address literal in doc's strings is
// replaced with Placeholder, in a string that holds JSON too (an SNS notification's Message).
// Only for a document about the erased person: the caller knows it is (its recipient is the
// address).
func RedactIPs(doc []byte) ([]byte, bool, error) {
	v, err := decode(doc)
	if err != nil {
		return nil, false, err
	}
	v, changed := redactIPValue(v)
	if !changed {
		return doc, false, nil
	}
	out, err := encode(v)
	return out, err == nil, err
}

func redactIPValue(v any) (any, bool) {
	switch v := v.(type) {
	case string:
		return RedactIPText(v)
	case []any:
		changed := false
		for i, e := range v {
			var c bool
			v[i], c = redactIPValue(e)
			changed = changed || c
		}
		return v, changed
	case map[string]any:
		changed := false
		for k, e := range v {
			var c bool
			v[k], c = redactIPValue(e)
			changed = changed || c
		}
		return v, changed
	}
	return v, false
}

// dropEngagementIP removes a normalized event's engagement.ip (and the engagement when nothing
// else is left of it), and reports whether there was one.
func dropEngagementIP(obj map[string]any) bool {
	e, ok := obj["engagement"].(map[string]any)
	if !ok {
		return false
	}
	if _, ok := e["ip"]; !ok {
		return false
	}
	delete(e, "ip")
	if len(e) == 0 {
		delete(obj, "engagement")
	}
	return true
}
