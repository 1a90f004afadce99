// Package fieldmap maps a provider's JSON objects onto events by configured field paths. It is
// the event mapping of the generic providers (hmac, standard-webhooks), whose settings name the
// type, message id, recipient and time fields and a type → status map.
package fieldmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
)

// DefaultTypeField is where the event type is read when generic.type_field is not set.
const DefaultTypeField = "type"

// statusTargets are the values generic.status_map may map a type to.
var statusTargets = map[string]provider.Class{
	"accepted":     {Kind: domain.KindStatus, Status: domain.StatusAccepted},
	"deferred":     {Kind: domain.KindStatus, Status: domain.StatusDeferred},
	"delivered":    {Kind: domain.KindStatus, Status: domain.StatusDelivered},
	"failed":       {Kind: domain.KindStatus, Status: domain.StatusFailed},
	"bounced":      {Kind: domain.KindStatus, Status: domain.StatusBounced},
	"complained":   {Kind: domain.KindStatus, Status: domain.StatusComplained},
	"opened":       {Kind: domain.KindOpened, Status: domain.StatusNone},
	"clicked":      {Kind: domain.KindClicked, Status: domain.StatusNone},
	"unsubscribed": {Kind: domain.KindUnsubscribed, Status: domain.StatusNone},
	"inbound":      {Kind: domain.KindInbound, Status: domain.StatusNone},
}

func targetNames() string {
	names := make([]string, 0, len(statusTargets))
	for n := range statusTargets {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Path is a parsed dotted field path: "data.email_id" is {"data", "email_id"}. A segment of
// decimal digits also indexes an array ("data.to.0").
type Path []string

// ParsePath parses a dotted path from setting key; empty means "not configured" (nil).
func ParsePath(name, key, s string) (Path, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	p := Path(strings.Split(s, "."))
	for _, seg := range p {
		if seg == "" {
			return nil, fmt.Errorf("%s: %s %q has an empty segment", name, key, s)
		}
	}
	return p, nil
}

func (p Path) String() string { return strings.Join(p, ".") }

// Lookup walks p from v (decoded with UseNumber) and returns the value there, or false when a
// segment is missing or the value is JSON null.
func (p Path) Lookup(v any) (any, bool) {
	for _, seg := range p {
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[seg]; !ok {
				return nil, false
			}
		case []any:
			i, ok := index(seg)
			if !ok || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, v != nil
}

// index parses an array index: decimal digits only, no sign.
func index(seg string) (int, bool) {
	if len(seg) == 0 || len(seg) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(seg); i++ {
		if seg[i] < '0' || seg[i] > '9' {
			return 0, false
		}
		n = n*10 + int(seg[i]-'0')
	}
	return n, true
}

// Mapping turns one JSON object into an event according to the generic settings.
type Mapping struct {
	typeField, messageID, recipient, occurredAt Path
	bounceType, diagnostic                      Path
	bounceTypes                                 map[string]string // bounce_type_map, keys as written
	status                                      map[string]provider.Class
}

// New validates the event-mapping part of the generic settings; errors start with name and name
// the key.
func New(name string, g *provider.Generic) (*Mapping, error) {
	if g == nil {
		return nil, fmt.Errorf("%s: generic is required (at least generic.message_id_field)", name)
	}
	m := &Mapping{status: map[string]provider.Class{}}
	var err error
	typeField := g.TypeField
	if strings.TrimSpace(typeField) == "" {
		typeField = DefaultTypeField
	}
	if m.typeField, err = ParsePath(name, "generic.type_field", typeField); err != nil {
		return nil, err
	}
	if m.messageID, err = ParsePath(name, "generic.message_id_field", g.MessageIDField); err != nil {
		return nil, err
	}
	if m.messageID == nil {
		return nil, fmt.Errorf("%s: generic.message_id_field is required", name)
	}
	if m.recipient, err = ParsePath(name, "generic.recipient_field", g.RecipientField); err != nil {
		return nil, err
	}
	if m.occurredAt, err = ParsePath(name, "generic.occurred_at_field", g.OccurredAtField); err != nil {
		return nil, err
	}
	if m.bounceType, err = ParsePath(name, "generic.bounce_type_field", g.BounceTypeField); err != nil {
		return nil, err
	}
	if m.diagnostic, err = ParsePath(name, "generic.diagnostic_field", g.DiagnosticField); err != nil {
		return nil, err
	}
	if len(g.BounceTypeMap) > 0 && m.bounceType == nil {
		return nil, fmt.Errorf("%s: generic.bounce_type_map needs generic.bounce_type_field", name)
	}
	m.bounceTypes = map[string]string{}
	for v, t := range g.BounceTypeMap {
		switch bt := strings.ToLower(strings.TrimSpace(t)); bt {
		case domain.BounceHard, domain.BounceSoft:
			m.bounceTypes[strings.TrimSpace(v)] = bt
		default:
			return nil, fmt.Errorf("%s: generic.bounce_type_map[%q]: %q is not hard or soft", name, v, t)
		}
	}
	for typ, v := range g.StatusMap {
		if strings.TrimSpace(typ) == "" {
			return nil, fmt.Errorf("%s: generic.status_map has an empty type", name)
		}
		t, ok := statusTargets[strings.ToLower(strings.TrimSpace(v))]
		if !ok {
			return nil, fmt.Errorf("%s: generic.status_map[%q]: %q is not one of %s", name, typ, v, targetNames())
		}
		m.status[typ] = t
	}
	return m, nil
}

// Map maps one decoded object; where prefixes reasons (e.g. "element 3: " in a batch). The
// caller sets Provider, EventID and Raw.
func (m *Mapping) Map(name string, obj map[string]any, where string) (domain.Event, error) {
	raw, ok := m.typeField.Lookup(obj)
	if !ok {
		return domain.Event{}, provider.BadRequest(name, "%smissing type field %q", where, m.typeField)
	}
	typ, ok := Scalar(raw)
	switch {
	case !ok:
		return domain.Event{}, provider.BadRequest(name, "%stype field %q is not a string", where, m.typeField)
	case typ == "":
		return domain.Event{}, provider.BadRequest(name, "%stype field %q is empty", where, m.typeField)
	}
	c := provider.Classify(m.status, typ)
	ev := domain.Event{Type: typ, Kind: c.Kind, Status: c.Status}
	if raw, ok := m.messageID.Lookup(obj); ok {
		if ev.MessageID, ok = Scalar(raw); !ok {
			return domain.Event{}, provider.BadRequest(name, "%smessage id field %q is not a string", where, m.messageID)
		}
	}
	if provider.Unapplicable(&ev) {
		// typ is a status_map key here, so this echoes configuration, not request data.
		return domain.Event{}, provider.BadRequest(name, "%s%s event has no message id at %q", where, typ, m.messageID)
	}
	in := m.bounceInput(obj)
	if m.recipient != nil {
		if raw, ok := m.recipient.Lookup(obj); ok {
			// The diagnostic, when mapped, may name which of several recipients bounced.
			ev.Recipient = provider.Recipient(ev.Kind, addresses(raw), in.Diagnostic)
		}
	}
	if ev.Status == domain.StatusBounced {
		// Kept when the provider said nothing else (bounce.Apply leaves an empty Input alone).
		ev.BounceType = in.ProviderBounceType
	}
	bounce.Apply(&ev, in)
	if m.occurredAt != nil {
		if raw, ok := m.occurredAt.Lookup(obj); ok {
			ev.OccurredAt = timeValue(raw)
		}
	}
	return ev, nil
}

// bounceInput reads the mapped bounce fields of obj. The bounce type's value is the provider's
// hard or soft (through bounce_type_map when one is set, else the value itself, either case)
// and one of its reasons, which internal/bounce reads only when the codes and the text say
// nothing; the diagnostic is the remote server's reply, whose codes and words decide first.
func (m *Mapping) bounceInput(obj map[string]any) bounce.Input {
	var in bounce.Input
	if raw, ok := m.bounceType.Lookup(obj); m.bounceType != nil && ok {
		if v, ok := Scalar(raw); ok && v != "" {
			in.ProviderReasons = []string{v}
			if t, ok := m.bounceTypes[v]; ok {
				in.ProviderBounceType = t
			} else if len(m.bounceTypes) == 0 {
				in.ProviderBounceType = strings.ToLower(v)
			}
		}
	}
	if raw, ok := m.diagnostic.Lookup(obj); m.diagnostic != nil && ok {
		in.Diagnostic, _ = Scalar(raw)
	}
	return in
}

// Decode decodes exactly one JSON value, keeping numbers as their literal text.
func Decode(name string, body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var syn *json.SyntaxError
		switch {
		case errors.As(err, &syn):
			return nil, provider.BadRequest(name, "malformed JSON at offset %d", syn.Offset)
		case errors.Is(err, io.EOF):
			return nil, provider.BadRequest(name, "empty body")
		default:
			return nil, provider.BadRequest(name, "malformed JSON")
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, provider.BadRequest(name, "data after the JSON value")
	}
	return v, nil
}

// Kind names a decoded JSON value's type for error messages.
func Kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	}
	return "value"
}

// Scalar returns a string or a number (as its literal text), trimmed: ids are sometimes numeric.
func Scalar(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return strings.TrimSpace(s), true
	case json.Number:
		return s.String(), true
	}
	return "", false
}

// addresses takes the recipients from a string, an {"email": …} object, or the usable elements
// of an array of either (only its top level is looked into).
func addresses(v any) []string {
	items, ok := v.([]any)
	if !ok {
		items = []any{v}
	}
	var out []string
	for _, item := range items {
		var s string
		switch it := item.(type) {
		case string:
			s = it
		case map[string]any:
			s, _ = it["email"].(string)
		}
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// timeValue reads an RFC 3339 string or unix seconds (a number or a numeric string, optionally
// with a fraction). Anything else is the zero time: an odd timestamp does not make an event
// unacceptable.
func timeValue(v any) time.Time {
	var s string
	switch t := v.(type) {
	case string:
		s = strings.TrimSpace(t)
		if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return ts.UTC()
		}
	case json.Number:
		s = t.String()
	default:
		return time.Time{}
	}
	return unixSeconds(s)
}

// unixSeconds parses "<digits>[.<digits>]", at most 12 integer digits (beyond year 33000).
func unixSeconds(s string) time.Time {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(whole) > 12 || !digits(whole) || !digits(frac) {
		return time.Time{}
	}
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return time.Time{}
	}
	var nsec int64
	if frac != "" {
		frac = (frac + "000000000")[:9]
		nsec, _ = strconv.ParseInt(frac, 10, 64)
	}
	return time.Unix(sec, nsec).UTC()
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
