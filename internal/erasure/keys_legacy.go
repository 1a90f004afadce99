package erasure

import (
	"maps"
	"slices"
)

// Versions before 2026-12-02 put the recipient's address into some keys: Postmark's derived
// event ids, and the event ids and message keys of SES notifications to several recipients
// (each provider's id_legacy.go). Those keys are primary keys, dedupe keys and workflow IDs, so
// redacting the address in them would break dedupe; an erasure instead re-keys such a row to
// the key this version gives the same event, which holds a tag where the address was, so the
// provider's retry stays a duplicate.
//
// The rules of those keys are the providers' own: the caller that wires the adapters (serve's
// PriorKeys) passes them in, so this package depends on no provider.
//
// Remove this file with the providers' id_legacy.go: once every row accepted by those versions
// is older than retention.dedupe_keys and retention.messages, no such key is left to re-key.

// PriorKeys maps a provider's name to the function that turns one of its prior keys into the
// current one (false: the key is not a prior version's).
type PriorKeys struct {
	EventIDs   map[string]func(prior string) (string, bool)
	MessageIDs map[string]func(prior string) (string, bool)
}

// Providers are the providers some of whose prior keys held the address, sorted.
func (p PriorKeys) Providers() []string {
	return slices.Sorted(maps.Keys(p.EventIDs))
}

// WithPriorKeys makes m re-key the prior keys of p (EventID, MessageID, RedactEvent); a
// Matcher without them re-keys nothing.
func (m *Matcher) WithPriorKeys(p PriorKeys) *Matcher {
	m.prior = p
	return m
}

// EventID returns the key to give a row whose event_id is id: the current form when id is a
// prior version's key that mentions the address, and false otherwise.
func (m *Matcher) EventID(provider, id string) (string, bool) {
	return m.rekey(m.prior.EventIDs[provider], id)
}

// MessageID is EventID for a message key.
func (m *Matcher) MessageID(provider, id string) (string, bool) {
	return m.rekey(m.prior.MessageIDs[provider], id)
}

func (m *Matcher) rekey(current func(string) (string, bool), id string) (string, bool) {
	if current == nil || !m.Mentions(id) {
		return "", false
	}
	return current(id)
}
