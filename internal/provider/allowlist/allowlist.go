// Package allowlist parses an endpoint's allow_cidrs and checks a request's source address
// against it, for the providers whose senders publish their address ranges.
package allowlist

import (
	"fmt"
	"net/netip"
	"strings"
)

// List is a set of networks; the empty List allows every address.
type List []netip.Prefix

// Parse reads allow_cidrs entries; a bare address is a single-address network. name prefixes
// errors (the provider), which name the entry, e.g. "postmark: allow_cidrs[1] …".
func Parse(name string, entries []string) (List, error) {
	var out List
	for i, e := range entries {
		e = strings.TrimSpace(e)
		if p, err := netip.ParsePrefix(e); err == nil {
			out = append(out, p.Masked())
			continue
		}
		addr, err := netip.ParseAddr(e)
		if err != nil || addr.Zone() != "" {
			return nil, fmt.Errorf("%s: allow_cidrs[%d] %q is not a CIDR or an IP address", name, i, e)
		}
		addr = addr.Unmap()
		out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
	}
	return out, nil
}

// Allows reports whether ip is inside one of the networks (always, for an empty List). An
// IPv4-mapped IPv6 address matches its IPv4 form; an unparsable address matches nothing.
func (l List) Allows(ip string) bool {
	if len(l) == 0 {
		return true
	}
	addr, err := netip.ParseAddr(strings.TrimSpace(ip))
	if err != nil {
		return false
	}
	addr = addr.WithZone("").Unmap()
	for _, p := range l {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
