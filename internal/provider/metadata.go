package provider

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider/jsonfield"
)

// The bounds of what an event carries of the sender's metadata and tags (docs/PROVIDERS.md,
// "Metadata and tags"). They keep a stored event and every notification about it small whatever
// a sender attached (SendGrid allows 10,000 bytes of custom arguments, Postmark and Resend
// dozens of entries): past them entries are dropped, counted in
// mailhook_metadata_dropped_total, and the event is accepted as usual.
const (
	MaxMetadataEntries    = 32
	MaxMetadataKeyBytes   = 128
	MaxMetadataValueBytes = 512
	MaxTags               = 16
	MaxTagBytes           = 128
)

// Metadata collects one event's metadata (string keys and values) and tags (strings) from a
// provider's fields, then bounds them onto the event (Apply). The first value given for a key
// wins, so an adapter adds its most specific source first. The zero value is ready to use.
type Metadata struct {
	entries map[string]string
	order   []string
	tags    []string
	dropped int
}

// Set adds key with a JSON value: a string as it is, a number or a boolean as its JSON text,
// an object or an array as its compact JSON text; null is no value.
func (m *Metadata) Set(key string, raw json.RawMessage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || jsonfield.IsNull(raw) {
		return
	}
	var s string
	if raw[0] == '"' {
		var ok bool
		if s, ok = jsonfield.String(raw); !ok {
			m.dropped++
			return
		}
	} else {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) != nil {
			m.dropped++
			return
		}
		s = buf.String()
	}
	m.SetString(key, s)
}

// SetString adds key with a string value.
func (m *Metadata) SetString(key, value string) {
	if m.entries == nil {
		m.entries = make(map[string]string, 4)
	}
	if _, ok := m.entries[key]; ok {
		return
	}
	m.entries[key] = value
	m.order = append(m.order, key)
}

// Object adds every member of a JSON object (Postmark Metadata, Mailgun user-variables, Resend
// tags, Postscale metadata); anything else adds nothing.
func (m *Metadata) Object(raw json.RawMessage) {
	if len(raw) == 0 || jsonfield.IsNull(raw) {
		return
	}
	// The usual case, a first source whose values are all strings, decodes in one pass into the
	// map the event keeps (Apply hands it over). A null value (kept out, as below) or any other
	// type takes the general path.
	if m.entries == nil && stringValues(raw) {
		var flat map[string]string
		if json.Unmarshal(raw, &flat) == nil && flat != nil {
			m.entries = flat
			m.order = make([]string, 0, len(flat))
			for k := range flat {
				m.order = append(m.order, k)
			}
			return
		}
	}
	var o jsonfield.Object
	if json.Unmarshal(raw, &o) != nil {
		return
	}
	if m.entries == nil {
		m.entries = make(map[string]string, len(o))
	}
	// In map order: Apply sorts the keys before it bounds them, so the same entries are kept on
	// every retry.
	for k, v := range o {
		m.Set(k, v)
	}
}

// stringValues reports whether raw is an object whose every value is a string, by a scan that
// allocates nothing (a failed decode into map[string]string would cost more than it saves).
func stringValues(raw []byte) bool {
	depth, inString, escaped, wantValue := 0, false, false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case wantValue:
			if c != '"' {
				return false
			}
			wantValue, inString = false, true
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ':' && depth == 1:
			wantValue = true
		}
	}
	return depth == 0 && !inString
}

// Tags adds a tag or a list of them: a JSON string or an array of strings; other elements are
// skipped.
func (m *Metadata) Tags(raw json.RawMessage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || jsonfield.IsNull(raw) {
		return
	}
	if raw[0] == '"' {
		if one, ok := jsonfield.String(raw); ok {
			m.Tag(one)
		}
		return
	}
	var strs []string // the usual list: one decode, no per-element pass
	if json.Unmarshal(raw, &strs) == nil {
		for _, t := range strs {
			m.Tag(t)
		}
		return
	}
	var one string
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return
	}
	for _, e := range list {
		if json.Unmarshal(e, &one) == nil {
			m.Tag(one)
		}
	}
}

// Tag adds one tag; blank tags are skipped.
func (m *Metadata) Tag(t string) {
	if strings.TrimSpace(t) != "" {
		m.tags = append(m.tags, strings.TrimSpace(t))
	}
}

// Apply sets ev.Metadata and ev.Tags within the bounds and ev.MetadataDropped to what they
// dropped: a key that is empty or longer than MaxMetadataKeyBytes, a value longer than
// MaxMetadataValueBytes, a key or value that is not valid UTF-8 or holds a NUL (jsonb refuses
// \u0000), the entries past MaxMetadataEntries in key order, and likewise for tags (a repeated
// tag is kept once and is not counted).
func (m *Metadata) Apply(ev *domain.Event) {
	dropped := m.dropped
	if len(m.order) == 0 && len(m.tags) == 0 {
		ev.MetadataDropped = dropped
		return
	}
	// Apply hands its entries to ev when it keeps them all (the usual case): one map, not two.
	keys := make([]string, 0, len(m.order))
	for _, k := range m.order {
		if k == "" || len(k) > MaxMetadataKeyBytes || !clean(k) {
			dropped++
			continue
		}
		if v := m.entries[k]; len(v) > MaxMetadataValueBytes || !clean(v) {
			dropped++
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > MaxMetadataEntries {
		dropped += len(keys) - MaxMetadataEntries
		keys = keys[:MaxMetadataEntries]
	}
	switch {
	case len(keys) > 0 && len(keys) == len(m.entries):
		ev.Metadata, m.entries, m.order = m.entries, nil, nil
	case len(keys) > 0:
		ev.Metadata = make(map[string]string, len(keys))
		for _, k := range keys {
			ev.Metadata[k] = m.entries[k]
		}
	}
	for _, t := range m.tags {
		switch {
		case slices.Contains(ev.Tags, t):
		case len(t) > MaxTagBytes || !clean(t) || len(ev.Tags) == MaxTags:
			dropped++
		default:
			ev.Tags = append(ev.Tags, t)
		}
	}
	ev.MetadataDropped = dropped
}

func clean(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }
