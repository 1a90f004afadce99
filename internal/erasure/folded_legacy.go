package erasure

import (
	"slices"

	"github.com/mailhook/mailhook/internal/mailaddr"
)

// foldedKeys are the keys a version before issue 41 gave address, as migration 21 re-keyed them
// (mailaddr.LegacyKeys): a suppression row those versions wrote under one of them (folded) may be
// this address's, since they could not tell it from others that fold alike. Erasure takes it.
// Remove with mailaddr.LegacyKey (its comment says when).
func foldedKeys(address string) []string {
	var out []string
	for _, l := range mailaddr.LegacyKeys(address) {
		if k := mailaddr.Key(l); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// FoldedKey reports whether key, a folded suppression row's, is one foldedKeys names.
func (m *Matcher) FoldedKey(key string) bool { return slices.Contains(m.folded, key) }
