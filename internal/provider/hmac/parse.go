package hmac

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

	"github.com/mailhook/mailhook/internal/event"
	"github.com/mailhook/mailhook/internal/provider"
)

// DefaultTypeField is where the event type is read when generic.type_field is not set.
const DefaultTypeField = "type"

// MaxEventIDBytes bounds an event id. It becomes part of a Temporal workflow ID (limited to
// 1000 bytes by default).
const MaxEventIDBytes = 512

type target struct {
	kind   event.Kind
	status event.Status
}

// statusTargets are the values generic.status_map may map a type to.
var statusTargets = map[string]target{
	"accepted":     {event.KindStatus, event.StatusAccepted},
	"deferred":     {event.KindStatus, event.StatusDeferred},
	"delivered":    {event.KindStatus, event.StatusDelivered},
	"failed":       {event.KindStatus, event.StatusFailed},
	"bounced":      {event.KindStatus, event.StatusBounced},
	"complained":   {event.KindStatus, event.StatusComplained},
	"opened":       {event.KindOpened, event.StatusNone},
	"clicked":      {event.KindClicked, event.StatusNone},
	"unsubscribed": {event.KindUnsubscribed, event.StatusNone},
	"inbound":      {event.KindInbound, event.StatusNone},
}

func targetNames() string {
	names := make([]string, 0, len(statusTargets))
	for n := range statusTargets {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// needsMessage reports whether events of kind k change a message and so cannot be applied
// without knowing which one.
func needsMessage(k event.Kind) bool {
	switch k {
	case event.KindStatus, event.KindOpened, event.KindClicked, event.KindUnsubscribed:
		return true
	}
	return false
}

// badRequest wraps provider.ErrBadRequest and puts the reason last, so the innermost error (what
// the HTTP layer reports) says what is wrong. Reasons name fields, never echo body content.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("hmac: %w: %w", provider.ErrBadRequest, fmt.Errorf(format, args...))
}

// path is a parsed dotted field path: "data.email_id" is {"data", "email_id"}. A segment of
// decimal digits also indexes an array ("data.to.0").
type path []string

func parsePath(key, s string) (path, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	p := path(strings.Split(s, "."))
	for _, seg := range p {
		if seg == "" {
			return nil, fmt.Errorf("hmac: %s %q has an empty segment", key, s)
		}
	}
	return p, nil
}

func (p path) String() string { return strings.Join(p, ".") }

// lookup walks p from v (decoded with UseNumber) and returns the value there, or false when a
// segment is missing or the value is JSON null.
func (p path) lookup(v any) (any, bool) {
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

// mapping turns one JSON object into an event according to the generic settings.
type mapping struct {
	typeField, messageID, recipient, occurredAt path
	status                                      map[string]target
}

func newMapping(g *provider.Generic) (*mapping, error) {
	m := &mapping{status: map[string]target{}}
	var err error
	typeField := g.TypeField
	if strings.TrimSpace(typeField) == "" {
		typeField = DefaultTypeField
	}
	if m.typeField, err = parsePath("generic.type_field", typeField); err != nil {
		return nil, err
	}
	if m.messageID, err = parsePath("generic.message_id_field", g.MessageIDField); err != nil {
		return nil, err
	}
	if m.messageID == nil {
		return nil, errors.New("hmac: generic.message_id_field is required")
	}
	if m.recipient, err = parsePath("generic.recipient_field", g.RecipientField); err != nil {
		return nil, err
	}
	if m.occurredAt, err = parsePath("generic.occurred_at_field", g.OccurredAtField); err != nil {
		return nil, err
	}
	for typ, v := range g.StatusMap {
		if strings.TrimSpace(typ) == "" {
			return nil, errors.New("hmac: generic.status_map has an empty type")
		}
		t, ok := statusTargets[strings.ToLower(strings.TrimSpace(v))]
		if !ok {
			return nil, fmt.Errorf("hmac: generic.status_map[%q]: %q is not one of %s", typ, v, targetNames())
		}
		m.status[typ] = t
	}
	return m, nil
}

// Parse turns a verified body into events: one for a JSON object, one per element for an array
// (a batch). Each event's Raw is its own element's bytes. The event id comes from
// generic.event_id_field of each element, or from generic.event_id_header, which names only one
// event and so cannot be used with a batch.
func (a *Adapter) Parse(r provider.Request) ([]event.Event, error) {
	trimmed := bytes.TrimLeft(r.Body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return a.parseBatch(r)
	}
	v, err := decodeValue(r.Body)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("body is a JSON %s, not an object or an array of objects", jsonKind(v))
	}
	id, err := a.eventID(r, obj, "")
	if err != nil {
		return nil, err
	}
	ev, err := a.m.mapObject(obj, "")
	if err != nil {
		return nil, err
	}
	ev.Provider, ev.EventID, ev.Raw = Name, id, json.RawMessage(bytes.Clone(r.Body))
	return []event.Event{ev}, nil
}

func (a *Adapter) parseBatch(r provider.Request) ([]event.Event, error) {
	if a.eventIDHeader != "" {
		return nil, badRequest("body is a batch, and generic.event_id_header cannot identify its events")
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(r.Body, &elems); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, badRequest("malformed JSON at offset %d", syn.Offset)
		}
		return nil, badRequest("malformed JSON")
	}
	if len(elems) == 0 {
		return nil, badRequest("empty batch")
	}
	events := make([]event.Event, 0, len(elems))
	for i, raw := range elems {
		where := fmt.Sprintf("element %d: ", i)
		v, err := decodeValue(raw)
		if err != nil {
			return nil, err
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, badRequest("%sa JSON %s, not an object", where, jsonKind(v))
		}
		id, err := a.eventID(r, obj, where)
		if err != nil {
			return nil, err
		}
		ev, err := a.m.mapObject(obj, where)
		if err != nil {
			return nil, err
		}
		ev.Provider, ev.EventID, ev.Raw = Name, id, json.RawMessage(bytes.Clone(raw))
		events = append(events, ev)
	}
	return events, nil
}

func (a *Adapter) eventID(r provider.Request, obj map[string]any, where string) (string, error) {
	var id string
	if a.eventIDHeader != "" {
		if id = strings.TrimSpace(r.Header.Get(a.eventIDHeader)); id == "" {
			return "", badRequest("no %s header", a.eventIDHeader)
		}
	} else {
		raw, ok := a.eventIDField.lookup(obj)
		if !ok {
			return "", badRequest("%smissing event id field %q", where, a.eventIDField)
		}
		if id, ok = scalar(raw); !ok {
			return "", badRequest("%sevent id field %q is not a string", where, a.eventIDField)
		}
		if id == "" {
			return "", badRequest("%sevent id field %q is empty", where, a.eventIDField)
		}
	}
	if len(id) > MaxEventIDBytes {
		return "", badRequest("%sevent id is %d bytes, limit %d", where, len(id), MaxEventIDBytes)
	}
	return id, nil
}

func (m *mapping) mapObject(obj map[string]any, where string) (event.Event, error) {
	raw, ok := m.typeField.lookup(obj)
	if !ok {
		return event.Event{}, badRequest("%smissing type field %q", where, m.typeField)
	}
	typ, ok := scalar(raw)
	switch {
	case !ok:
		return event.Event{}, badRequest("%stype field %q is not a string", where, m.typeField)
	case typ == "":
		return event.Event{}, badRequest("%stype field %q is empty", where, m.typeField)
	}
	ev := event.Event{Type: typ, Kind: event.KindUnknown}
	if t, ok := m.status[typ]; ok {
		ev.Kind, ev.Status = t.kind, t.status
	}
	if raw, ok := m.messageID.lookup(obj); ok {
		if ev.MessageID, ok = scalar(raw); !ok {
			return event.Event{}, badRequest("%smessage id field %q is not a string", where, m.messageID)
		}
	}
	if ev.MessageID == "" && needsMessage(ev.Kind) {
		// typ is a status_map key here, so this echoes configuration, not request data.
		return event.Event{}, badRequest("%s%s event has no message id at %q", where, typ, m.messageID)
	}
	if m.recipient != nil {
		if raw, ok := m.recipient.lookup(obj); ok {
			ev.Recipient = address(raw)
		}
	}
	if m.occurredAt != nil {
		if raw, ok := m.occurredAt.lookup(obj); ok {
			ev.OccurredAt = timeValue(raw)
		}
	}
	return ev, nil
}

// decodeValue decodes exactly one JSON value, keeping numbers as their literal text.
func decodeValue(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var syn *json.SyntaxError
		switch {
		case errors.As(err, &syn):
			return nil, badRequest("malformed JSON at offset %d", syn.Offset)
		case errors.Is(err, io.EOF):
			return nil, badRequest("empty body")
		default:
			return nil, badRequest("malformed JSON")
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("data after the JSON value")
	}
	return v, nil
}

func jsonKind(v any) string {
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

// scalar returns a string or a number (as its literal text), trimmed: ids are sometimes numeric.
func scalar(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return strings.TrimSpace(s), true
	case json.Number:
		return s.String(), true
	}
	return "", false
}

// address takes a recipient from a string, an {"email": …} object, or the first usable element
// of an array of either.
func address(v any) string {
	switch a := v.(type) {
	case string:
		return strings.TrimSpace(a)
	case map[string]any:
		if s, ok := a["email"].(string); ok {
			return strings.TrimSpace(s)
		}
	case []any:
		for _, item := range a {
			switch it := item.(type) {
			case string:
				if s := strings.TrimSpace(it); s != "" {
					return s
				}
			case map[string]any:
				if s, ok := it["email"].(string); ok && strings.TrimSpace(s) != "" {
					return strings.TrimSpace(s)
				}
			}
		}
	}
	return ""
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
