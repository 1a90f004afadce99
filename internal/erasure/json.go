package erasure

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// RedactJSON replaces every mention of the address in doc's strings, object keys included,
// with Placeholder (RedactText), and returns the document and whether anything changed; doc is
// returned as it is when nothing did. The result is valid JSON, so it stays valid jsonb:
// numbers keep their exact text, and a key that a redaction makes equal to another one gets a
// "#2", "#3"… suffix (in key order) instead of overwriting it.
//
// It works on the decoded strings, so an address the JSON text writes with escapes
// (user\u0040example.com) is caught like any other.
func (m *Matcher) RedactJSON(doc []byte) ([]byte, bool, error) {
	v, err := decode(doc)
	if err != nil {
		return nil, false, err
	}
	removed := false
	if obj, ok := v.(map[string]any); ok {
		if data, ok := obj["data"].(map[string]any); ok {
			removed = m.dropSenderValues(data)
		}
	}
	v, changed := m.redactValue(v)
	if !changed && !removed {
		return doc, false, nil
	}
	out, err := encode(v)
	return out, err == nil, err
}

// dropSenderValues removes from obj's "metadata" the entries whose value is the address and
// from its "tags" the tags that are, and reports whether it removed any. Metadata and tags are
// the sender's own (domain.Event.Metadata): mailhook keeps them as sent, but a value that is
// the erased address would only say "[erased]" once redacted, so it goes; a value that merely
// mentions the address is redacted like any other text.
func (m *Matcher) dropSenderValues(obj map[string]any) bool {
	removed := false
	if md, ok := obj["metadata"].(map[string]any); ok {
		for k, v := range md {
			if s, ok := v.(string); ok && m.is(s) {
				delete(md, k)
				removed = true
			}
		}
	}
	if tags, ok := obj["tags"].([]any); ok {
		kept := tags[:0]
		for _, t := range tags {
			if s, ok := t.(string); ok && m.is(s) {
				removed = true
				continue
			}
			kept = append(kept, t)
		}
		obj["tags"] = kept
	}
	return removed
}

// is reports whether s is the address and nothing else.
func (m *Matcher) is(s string) bool {
	r, changed := m.RedactText(strings.TrimSpace(s))
	return changed && r == Placeholder
}

// RedactEvent is RedactJSON for a normalized event (domain.Event's JSON): a top-level
// "recipient" that mentions the address is removed rather than replaced, so that processing
// the event again (a replay, a redrive) finds no recipient instead of taking Placeholder for
// one, which a hard bounce would then suppress, and its engagement's IP address goes with it; and
// its keys are re-keyed (Matcher.EventID).
func (m *Matcher) RedactEvent(doc []byte) ([]byte, bool, error) {
	v, err := decode(doc)
	if err != nil {
		return nil, false, err
	}
	removed := false
	if obj, ok := v.(map[string]any); ok {
		if r, ok := obj["recipient"].(string); ok && m.Mentions(r) {
			delete(obj, "recipient")
			// The event is the person's: so is the IP address their client opened or clicked from.
			dropEngagementIP(obj)
			removed = true
		}
		// The keys a prior version built with the address get the ones the row is re-keyed
		// to (keys_legacy.go), so processing the event again finds its rows.
		provider, _ := obj["provider"].(string)
		if id, ok := obj["event_id"].(string); ok {
			if current, ok := m.EventID(provider, id); ok {
				obj["event_id"], removed = current, true
			}
		}
		if id, ok := obj["message_id"].(string); ok {
			if current, ok := m.MessageID(provider, id); ok {
				obj["message_id"], removed = current, true
			}
		}
		if id, ok := obj["prior_message_id"].(string); ok && m.Mentions(id) {
			delete(obj, "prior_message_id")
			removed = true
		}
		if m.dropSenderValues(obj) {
			removed = true
		}
	}
	v, changed := m.redactValue(v)
	if !changed && !removed {
		return doc, false, nil
	}
	out, err := encode(v)
	return out, err == nil, err
}

func (m *Matcher) redactValue(v any) (any, bool) {
	switch v := v.(type) {
	case string:
		return m.RedactText(v)
	case []any:
		changed := false
		for i, e := range v {
			var c bool
			v[i], c = m.redactValue(e)
			changed = changed || c
		}
		return v, changed
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // deterministic suffixes
		out := make(map[string]any, len(v))
		changed := false
		for _, k := range keys {
			val, c := m.redactValue(v[k])
			changed = changed || c
			nk, c := m.RedactText(k)
			if c {
				changed = true
				// A redacted key gives way to every key of the input (kept as they are) and to
				// the redacted keys before it, so no value is lost.
				_, inIn := v[nk]
				_, inOut := out[nk]
				if inIn || inOut {
					nk = freeKey(out, v, nk)
				}
			}
			out[nk] = val
		}
		return out, changed
	}
	return v, false // numbers, booleans, null
}

// freeKey is key#n for the smallest n ≥ 2 that neither the input object nor the output holds.
func freeKey(out, in map[string]any, key string) string {
	for n := 2; ; n++ {
		k := key + "#" + strconv.Itoa(n)
		_, inOut := out[k]
		_, inIn := in[k]
		if !inOut && !inIn {
			return k
		}
	}
}

func decode(doc []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // exact numbers, never rounded through float64
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("redact json: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("redact json: data after the document")
	}
	return v, nil
}

func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("redact json: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
