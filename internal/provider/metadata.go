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
		if entries, ok := flatStrings(raw); ok {
			m.entries = entries
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
// is, a number or a boolean as its JSON text, null as no value. The object is copied into one
// string and the keys and values without escapes are sliced out of it: a map and a string per
// object, not two strings per entry. ok is false for anything else (a nested value, malformed
// JSON), which the general path takes. A repeated key keeps its last value, as json.Unmarshal
// does.
func flatStrings(raw []byte) (entries map[string]string, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	entries = make(map[string]string, 4)
	if i = skipSpace(raw, i+1); i < len(raw) && raw[i] == '}' {
		return entries, skipSpace(raw, i+1) == len(raw)
	}
	s := string(raw)
	for {
		k, next, ok := scanString(raw, s, i)
		if !ok {
			return nil, false
		}
		if i = skipSpace(raw, next); i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		v, null, next, ok := scanValue(raw, s, skipSpace(raw, i+1))
		if !ok {
			return nil, false
		}
		if !null {
			entries[k] = v
		}
		switch i = skipSpace(raw, next); {
		case i < len(raw) && raw[i] == ',':
			i = skipSpace(raw, i+1)
		case i < len(raw) && raw[i] == '}':
			return entries, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

// flatTags appends the strings of a JSON array of strings to tags, as Tag adds each (one string
// for the array, each tag sliced out of it). ok is false for anything else (another element's
// type, malformed JSON), and tags is then returned as it was given.
func flatTags(raw []byte, tags []string) (_ []string, ok bool) {
	n0 := len(tags)
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return tags, false
	}
	if i = skipSpace(raw, i+1); i < len(raw) && raw[i] == ']' {
		return tags, skipSpace(raw, i+1) == len(raw)
	}
	s := string(raw)
	tags = slices.Grow(tags, bytes.Count(raw, []byte{','})+1) // commas inside tags over-count
	for {
		t, next, ok := scanString(raw, s, i)
		if !ok {
			return tags[:n0], false
		}
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
		switch i = skipSpace(raw, next); {
		case i < len(raw) && raw[i] == ',':
			i = skipSpace(raw, i+1)
		case i < len(raw) && raw[i] == ']':
			if skipSpace(raw, i+1) != len(raw) {
				return tags[:n0], false
			}
			return tags, true
		default:
			return tags[:n0], false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanValue reads the value at b[i:] (s is b as a string); null says it is null.
func scanValue(b []byte, s string, i int) (v string, null bool, next int, ok bool) {
	if i < len(b) && b[i] == '"' {
		v, next, ok = scanString(b, s, i)
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
	return s[i:j], false, j, true
}

// scanString decodes the JSON string at b[i:] (s is b as a string), returning it and the index
// after it. One without escapes, control or non-ASCII bytes is a slice of s; the others take
// jsonfield.String, which decodes them as the decoder does.
func scanString(b []byte, s string, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	plain := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '\\':
			plain = false
			j++
		case c == '"':
			if plain {
				return s[i+1 : j], j + 1, true
			}
			v, ok := jsonfield.String(b[i : j+1])
			return v, j + 1, ok
		case c < 0x20 || c >= utf8.RuneSelf:
			plain = false
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
	var ok bool
	if m.tags, ok = flatTags(raw, m.tags); ok { // the usual list
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
// tag is kept once and is not counted). In the usual case, everything within the bounds, the
// event is handed the map and the tag list as they are: no copy, no sorted keys.
func (m *Metadata) Apply(ev *domain.Event) {
	dropped := m.dropped
	if len(m.entries) == 0 && len(m.tags) == 0 {
		ev.MetadataDropped = dropped
		return
	}
	m.applyEntries(ev, &dropped)
	m.applyTags(ev, &dropped)
	ev.MetadataDropped = dropped
}

func validEntry(k, v string) bool {
	return k != "" && len(k) <= MaxMetadataKeyBytes && clean(k) && len(v) <= MaxMetadataValueBytes && clean(v)
}

// applyEntries sets ev.Metadata within the bounds, counting what it drops.
func (m *Metadata) applyEntries(ev *domain.Event, dropped *int) {
	if len(m.entries) == 0 {
		return
	}
	all := len(m.entries) <= MaxMetadataEntries
	for k, v := range m.entries {
		if !all {
			break
		}
		all = validEntry(k, v)
	}
	if all {
		ev.Metadata, m.entries = m.entries, nil
		return
	}
	keys := make([]string, 0, len(m.entries))
	for k, v := range m.entries {
		if !validEntry(k, v) {
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

// applyTags sets ev.Tags within the bounds, in the order given, counting what it drops.
func (m *Metadata) applyTags(ev *domain.Event, dropped *int) {
	if len(m.tags) == 0 {
		return
	}
	all := len(m.tags) <= MaxTags
	for i, t := range m.tags {
		if !all {
			break
		}
		all = len(t) <= MaxTagBytes && clean(t) && !slices.Contains(m.tags[:i], t)
	}
	if all {
		ev.Tags, m.tags = m.tags, nil
		return
	}
	ev.Tags = make([]string, 0, min(len(m.tags), MaxTags))
	for _, t := range m.tags {
		switch {
		case slices.Contains(ev.Tags, t):
		case len(t) > MaxTagBytes || !clean(t) || len(ev.Tags) == MaxTags:
			*dropped++
		default:
			ev.Tags = append(ev.Tags, t)
		}
	}
}

func clean(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }
