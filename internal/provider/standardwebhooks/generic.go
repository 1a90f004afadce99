package standardwebhooks

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

// DefaultTypeField is where the event type is when generic.type_field is not set: Standard
// Webhooks' own payload structure puts it at the top-level "type".
const DefaultTypeField = "type"

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

// path is a parsed dotted field path: "data.email_id" is {"data", "email_id"}. A segment that is
// a decimal number also indexes an array ("data.to.0").
type path []string

func parsePath(name, key, s string) (path, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	p := path(strings.Split(s, "."))
	for _, seg := range p {
		if seg == "" {
			return nil, fmt.Errorf("%s: %s %q has an empty segment", name, key, s)
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

// newMapping validates the event-mapping part of the generic settings; errors name the key.
func newMapping(name string, g *provider.Generic) (*mapping, error) {
	if g == nil {
		return nil, fmt.Errorf("%s: generic is required (at least generic.message_id_field)", name)
	}
	// The signature scheme is fixed, and the event id is always the webhook-id header.
	for _, f := range []struct{ key, value string }{
		{"signature_header", g.SignatureHeader}, {"signature_prefix", g.SignaturePrefix}, {"algorithm", g.Algorithm},
		{"encoding", g.Encoding}, {"signed", g.Signed}, {"timestamp_header", g.TimestampHeader}, {"separator", g.Separator},
	} {
		if f.value != "" {
			return nil, fmt.Errorf("%s: generic.%s does not apply: Standard Webhooks fixes the signature scheme", name, f.key)
		}
	}
	if g.EventIDField != "" || g.EventIDHeader != "" {
		return nil, fmt.Errorf("%s: generic.event_id_field and generic.event_id_header do not apply: the event id is the webhook-id header", name)
	}
	m := &mapping{status: map[string]target{}}
	var err error
	typeField := g.TypeField
	if strings.TrimSpace(typeField) == "" {
		typeField = DefaultTypeField
	}
	if m.typeField, err = parsePath(name, "generic.type_field", typeField); err != nil {
		return nil, err
	}
	if m.messageID, err = parsePath(name, "generic.message_id_field", g.MessageIDField); err != nil {
		return nil, err
	}
	if m.messageID == nil {
		return nil, fmt.Errorf("%s: generic.message_id_field is required", name)
	}
	if m.recipient, err = parsePath(name, "generic.recipient_field", g.RecipientField); err != nil {
		return nil, err
	}
	if m.occurredAt, err = parsePath(name, "generic.occurred_at_field", g.OccurredAtField); err != nil {
		return nil, err
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

// parse decodes body, which must be one JSON object, and maps it. The caller sets the event id.
func (m *mapping) parse(name string, body []byte) (event.Event, error) {
	v, err := decodeValue(name, body)
	if err != nil {
		return event.Event{}, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return event.Event{}, badRequest(name, "body is a JSON %s, not an object", jsonKind(v))
	}
	ev, err := m.mapObject(name, obj)
	if err != nil {
		return event.Event{}, err
	}
	ev.Raw = json.RawMessage(bytes.Clone(body))
	return ev, nil
}

func (m *mapping) mapObject(name string, obj map[string]any) (event.Event, error) {
	raw, ok := m.typeField.lookup(obj)
	if !ok {
		return event.Event{}, badRequest(name, "missing type field %q", m.typeField)
	}
	typ, ok := scalar(raw)
	switch {
	case !ok:
		return event.Event{}, badRequest(name, "type field %q is not a string", m.typeField)
	case typ == "":
		return event.Event{}, badRequest(name, "type field %q is empty", m.typeField)
	}
	ev := event.Event{Type: typ, Kind: event.KindUnknown}
	if t, ok := m.status[typ]; ok {
		ev.Kind, ev.Status = t.kind, t.status
	}
	if raw, ok := m.messageID.lookup(obj); ok {
		if ev.MessageID, ok = scalar(raw); !ok {
			return event.Event{}, badRequest(name, "message id field %q is not a string", m.messageID)
		}
	}
	if ev.MessageID == "" && needsMessage(ev.Kind) {
		// typ is a status_map key here, so this echoes configuration, not request data.
		return event.Event{}, badRequest(name, "%s event has no message id at %q", typ, m.messageID)
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
func decodeValue(name string, body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var syn *json.SyntaxError
		switch {
		case errors.As(err, &syn):
			return nil, badRequest(name, "malformed JSON at offset %d", syn.Offset)
		case errors.Is(err, io.EOF):
			return nil, badRequest(name, "empty body")
		default:
			return nil, badRequest(name, "malformed JSON")
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest(name, "data after the JSON value")
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

// scalar returns a string or a number (as its literal text) trimmed; ids are sometimes numeric.
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
