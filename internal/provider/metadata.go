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
	// The usual case, a first source whose values are all strings, is decoded straight into the
	// map the event keeps (Apply hands it over). A null value (kept out, as below) or any other
	// type takes the general path.
	if m.entries == nil {
		if entries, order, ok := flatStrings(raw); ok {
			m.entries, m.order = entries, order
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

// flatStrings decodes a flat object without reflection, as Set reads each value: a string as it
// is, a number or a boolean as its JSON text, null as no value. The keys and values are sliced
// out (jsonfield.String), a map and two strings per entry. ok is false for anything else (a
// nested value, malformed JSON), which the general path takes. A repeated key keeps its last
// value, as json.Unmarshal does.
func flatStrings(raw []byte) (entries map[string]string, order []string, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, nil, false
	}
	entries = make(map[string]string, 4)
	if i = skipSpace(raw, i+1); i < len(raw) && raw[i] == '}' {
		return entries, nil, skipSpace(raw, i+1) == len(raw)
	}
	for {
		k, next, ok := scanString(raw, i)
		if !ok {
			return nil, nil, false
		}
		if i = skipSpace(raw, next); i >= len(raw) || raw[i] != ':' {
			return nil, nil, false
		}
		v, null, next, ok := scanValue(raw, skipSpace(raw, i+1))
		if !ok {
			return nil, nil, false
		}
		if !null {
			if _, dup := entries[k]; !dup {
				order = append(order, k)
			}
			entries[k] = v
		}
		switch i = skipSpace(raw, next); {
		case i < len(raw) && raw[i] == ',':
			i = skipSpace(raw, i+1)
		case i < len(raw) && raw[i] == '}':
			return entries, order, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, nil, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanValue reads the value at b[i:]; null says it is null.
func scanValue(b []byte, i int) (v string, null bool, next int, ok bool) {
	if i < len(b) && b[i] == '"' {
		v, next, ok = scanString(b, i)
		return v, false, next, ok
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	lit := b[i:j]
	switch {
	case len(lit) == 0 || lit[0] == '{' || lit[0] == '[':
		return "", false, 0, false
	case string(lit) == "null":
		return "", true, j, true
	case !json.Valid(lit):
		return "", false, 0, false
	}
	return string(lit), false, j, true
}

// scanString decodes the JSON string at b[i:], returning it and the index after it.
func scanString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			s, ok := jsonfield.String(b[i : j+1])
			return s, j + 1, ok
		}
	}
	return "", 0, false
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
		m.tags = slices.Grow(m.tags, len(strs))
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
	m.applyEntries(ev, &dropped)
	if len(m.tags) > 0 {
		ev.Tags = make([]string, 0, min(len(m.tags), MaxTags))
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

// applyEntries sets ev.Metadata within the bounds, counting what it drops. When it keeps every
// entry (the usual case) it hands its map to ev: no second map, no sorted copy of the keys.
func (m *Metadata) applyEntries(ev *domain.Event, dropped *int) {
	valid := func(k string) bool {
		v := m.entries[k]
		return k != "" && len(k) <= MaxMetadataKeyBytes && clean(k) && len(v) <= MaxMetadataValueBytes && clean(v)
	}
	all := len(m.order) == len(m.entries) && len(m.order) <= MaxMetadataEntries
	for _, k := range m.order {
		if !all {
			break
		}
		all = valid(k)
	}
	if all {
		if len(m.order) > 0 {
			ev.Metadata, m.entries, m.order = m.entries, nil, nil
		}
		return
	}
	keys := make([]string, 0, len(m.order))
	for _, k := range m.order {
		if !valid(k) {
			*dropped++
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys) // the bounds keep the same entries on every retry
	if len(keys) > MaxMetadataEntries {
		*dropped += len(keys) - MaxMetadataEntries
		keys = keys[:MaxMetadataEntries]
	}
	if len(keys) > 0 {
		ev.Metadata = make(map[string]string, len(keys))
		for _, k := range keys {
			ev.Metadata[k] = m.entries[k]
		}
	}
}

func clean(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }
