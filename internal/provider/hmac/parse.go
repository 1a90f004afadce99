package hmac

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/fieldmap"
)

// DefaultTypeField is where the event type is read when generic.type_field is not set.
const DefaultTypeField = fieldmap.DefaultTypeField

func badRequest(format string, args ...any) error { return provider.BadRequest(Name, format, args...) }

// Parse turns a verified body into events: one for a JSON object, one per element for an array
// (a batch). Each event's Raw is its own element's bytes. The event id comes from
// generic.event_id_field of each element, or from generic.event_id_header, which names only one
// event and so cannot be used with a batch.
func (a *Adapter) Parse(r provider.Request) ([]domain.Event, error) {
	trimmed := bytes.TrimLeft(r.Body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return a.parseBatch(r)
	}
	v, err := fieldmap.Decode(Name, r.Body)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("body is a JSON %s, not an object or an array of objects", fieldmap.Kind(v))
	}
	id, err := a.eventID(r, obj, "")
	if err != nil {
		return nil, err
	}
	ev, err := a.m.Map(Name, obj, "")
	if err != nil {
		return nil, err
	}
	ev.Provider, ev.EventID, ev.Raw = Name, id, json.RawMessage(bytes.Clone(r.Body))
	return []domain.Event{ev}, nil
}

func (a *Adapter) parseBatch(r provider.Request) ([]domain.Event, error) {
	if a.eventIDHeader != "" {
		return nil, badRequest("body is a batch, and generic.event_id_header cannot identify its events")
	}
	// Only a body starting with '[' gets here, so it is an array or malformed.
	elems, err := provider.DecodeBatch(Name, r.Body)
	if err != nil {
		return nil, err
	}
	if len(elems) == 0 {
		return nil, badRequest("empty batch")
	}
	return provider.EachEvent(elems, func(i int, raw json.RawMessage) (domain.Event, error) {
		where := fmt.Sprintf("element %d: ", i)
		v, err := fieldmap.Decode(Name, raw)
		if err != nil {
			return domain.Event{}, err
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return domain.Event{}, badRequest("%sa JSON %s, not an object", where, fieldmap.Kind(v))
		}
		id, err := a.eventID(r, obj, where)
		if err != nil {
			return domain.Event{}, err
		}
		ev, err := a.m.Map(Name, obj, where)
		if err != nil {
			return domain.Event{}, err
		}
		ev.Provider, ev.EventID, ev.Raw = Name, id, json.RawMessage(bytes.Clone(raw))
		return ev, nil
	})
}

func (a *Adapter) eventID(r provider.Request, obj map[string]any, where string) (string, error) {
	var id string
	if a.eventIDHeader != "" {
		if id = strings.TrimSpace(r.Header.Get(a.eventIDHeader)); id == "" {
			return "", badRequest("no %s header", a.eventIDHeader)
		}
	} else {
		raw, ok := a.eventIDField.Lookup(obj)
		if !ok {
			return "", badRequest("%smissing event id field %q", where, a.eventIDField)
		}
		if id, ok = fieldmap.Scalar(raw); !ok {
			return "", badRequest("%sevent id field %q is not a string", where, a.eventIDField)
		}
		if id == "" {
			return "", badRequest("%sevent id field %q is empty", where, a.eventIDField)
		}
	}
	return id, nil
}
