package erasure

import (
	"slices"

	"github.com/mailhook/mailhook/internal/provider/postmark"
	"github.com/mailhook/mailhook/internal/provider/ses"
)

// Versions before 2026-12-02 put the recipient's address into some keys: Postmark's derived
// event ids, and the event ids and message keys of SES notifications to several recipients
// (each provider's id_legacy.go). Those keys are primary keys, dedupe keys and workflow IDs, so
// redacting the address in them would break dedupe; an erasure instead re-keys such a row to
// the key this version gives the same event, which holds a tag where the address was, so the
// provider's retry stays a duplicate.
//
// Remove this file with the providers' id_legacy.go: once every row accepted by those versions
// is older than retention.dedupe_keys and retention.messages, no such key is left to re-key.

var (
	priorEventIDs = map[string]func(string) (string, bool){
		postmark.Name: postmark.CurrentEventID,
		ses.Name:      ses.CurrentEventID,
	}
	priorMessageIDs = map[string]func(string) (string, bool){
		ses.Name: ses.CurrentMessageID,
	}
)

// EventID returns the key to give a row whose event_id is id: the current form when id is a
// prior version's key that mentions the address, and false otherwise.
func (m *Matcher) EventID(provider, id string) (string, bool) {
	return m.rekey(priorEventIDs[provider], id)
}

// MessageID is EventID for a message key.
func (m *Matcher) MessageID(provider, id string) (string, bool) {
	return m.rekey(priorMessageIDs[provider], id)
}

func (m *Matcher) rekey(current func(string) (string, bool), id string) (string, bool) {
	if current == nil || !m.Mentions(id) {
		return "", false
	}
	return current(id)
}

// PriorKeyProviders are the providers some of whose prior keys held the address, sorted.
func PriorKeyProviders() []string {
	out := make([]string, 0, len(priorEventIDs))
	for p := range priorEventIDs {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
