package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider/jsonfield"
)

// The steps every adapter's Parse is made of: decode the body (one object or a batch), read each
// event's fields, classify its type, apply the message-id rule, keep its raw JSON. Reasons are
// what the HTTP layer reports as a 400's reason, so they name fields and never echo body content.

// BadRequest wraps ErrBadRequest and puts the reason last, so the innermost error (what the HTTP
// layer reports) says what is wrong.
func BadRequest(name, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %w", name, ErrBadRequest, fmt.Errorf(format, args...))
}

// DecodeObject decodes a body that must be one JSON object.
func DecodeObject(name string, body []byte) (jsonfield.Object, error) {
	var top jsonfield.Object
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, decodeError(name, err, "an object")
	}
	if top == nil {
		return nil, BadRequest(name, "body is JSON null, not an object")
	}
	return top, nil
}

// DecodeBatch decodes a body that must be a JSON array. Each element is its own copy
// (json.RawMessage.UnmarshalJSON stores one), so an event's Raw never aliases the request buffer.
// An empty array is returned as such: providers word that refusal differently.
func DecodeBatch(name string, body []byte) ([]json.RawMessage, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(body, &elems); err != nil {
		return nil, decodeError(name, err, "an array")
	}
	if elems == nil {
		return nil, BadRequest(name, "body is JSON null, not an array")
	}
	return elems, nil
}

func decodeError(name string, err error, want string) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return BadRequest(name, "malformed JSON at offset %d", syn.Offset)
	case errors.As(err, &typ):
		return BadRequest(name, "body is a JSON %s, not %s", typ.Value, want)
	default:
		return BadRequest(name, "malformed JSON")
	}
}

// EachEvent parses every element of a batch with parse. Any malformed element fails the whole
// request: providers retry a batch as a unit, so accepting part of it would hide the broken
// element for good.
func EachEvent(elems []json.RawMessage, parse func(i int, raw json.RawMessage) (domain.Event, error)) ([]domain.Event, error) {
	events := make([]domain.Event, 0, len(elems))
	for i, raw := range elems {
		ev, err := parse(i, raw)
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	return events, nil
}

// One is the result of a Parse whose provider sends one event per request.
func One(ev domain.Event, err error) ([]domain.Event, error) {
	if err != nil {
		return nil, err
	}
	return []domain.Event{ev}, nil
}

// Fields reads the string fields of one JSON object of a body. Failures are bad requests of
// Provider whose reason starts with Where ("element 3: ") and names the key after Path
// ("event-data.").
type Fields struct {
	Provider string
	Where    string
	Path     string
}

// Required returns the string at key, untrimmed; it is a bad request when the key is absent,
// null, not a string or blank.
func (f Fields) Required(o jsonfield.Object, key string) (string, error) {
	raw, ok := o[key]
	if !ok || jsonfield.IsNull(raw) {
		return "", f.bad("missing %q", key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", f.bad("%q is not a string", key)
	}
	if strings.TrimSpace(s) == "" {
		return "", f.bad("%q is empty", key)
	}
	return s, nil
}

// Optional returns the trimmed string at key, "" when it is absent or null; another JSON type is
// a bad request, for fields whose wrong type means the body is not what it claims to be.
func (f Fields) Optional(o jsonfield.Object, key string) (string, error) {
	raw, ok := o[key]
	if !ok || jsonfield.IsNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", f.bad("%q is not a string", key)
	}
	return strings.TrimSpace(s), nil
}

func (f Fields) bad(format, key string) error {
	return BadRequest(f.Provider, "%s"+format, f.Where, f.Path+key)
}

// Class is what a provider's event type means: its kind and, for KindStatus, the status.
type Class struct {
	Kind   domain.Kind
	Status domain.Status
}

// Classify looks typ up in a provider's table; a type not in it is KindUnknown (recorded,
// changing nothing), so types a provider adds later are kept without being guessed at.
func Classify(types map[string]Class, typ string) Class {
	if c, ok := types[typ]; ok {
		return c
	}
	return Class{Kind: domain.KindUnknown}
}

// Unapplicable reports an event that changes a message but does not say which one: it cannot be
// applied. Providers whose every retry would fail the same way refuse it (a bad request); those
// that would lose other events or drop it for good record it with KeepAsUnknown.
func Unapplicable(ev *domain.Event) bool {
	return ev.MessageID == "" && ev.Kind.AppliesToMessage()
}

// KeepAsUnknown records an unapplicable event as unknown: kept with its raw JSON, changing
// nothing.
func KeepAsUnknown(ev *domain.Event) {
	if Unapplicable(ev) {
		ev.Kind, ev.Status, ev.BounceType = domain.KindUnknown, domain.StatusNone, ""
	}
}
