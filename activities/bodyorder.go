package activities

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/mailhook/mailhook/internal/domain"
)

// Ordered returns a stored notification body with its keys in the documented order: the
// envelope's (id, type, created_at, data) and, inside data, the order of its type's struct
// (StatusChanged, EmailReceived, SuppressionAdded). Bodies are kept as jsonb, which orders keys
// by length, so a receiver (and the dev sink) would read "status" before "provider". Keys the
// struct does not name (added by retention, say) follow in the order they came; nested objects
// are left as they are. The result depends only on the body, so every retry sends the same
// bytes; a body that is not an object is returned as it is.
func Ordered(body []byte) []byte {
	var env map[string]json.RawMessage
	if json.Unmarshal(body, &env) != nil || env == nil {
		return body
	}
	var typ string
	_ = json.Unmarshal(env["type"], &typ)
	if order, ok := dataOrder[typ]; ok {
		if data, ok := reorder(env["data"], order); ok {
			env["data"] = data
		}
	}
	keys, ok := objectKeys(body)
	if !ok {
		return body
	}
	sortBy(keys, envelopeOrder)
	return encodeOrdered(env, keys)
}

var (
	envelopeOrder = jsonKeys(reflect.TypeFor[Envelope]())
	dataOrder     = map[string][]string{
		domain.TypeStatusChanged:    jsonKeys(reflect.TypeFor[StatusChanged]()),
		domain.TypeEmailReceived:    jsonKeys(reflect.TypeFor[EmailReceived]()),
		domain.TypeSuppressionAdded: jsonKeys(reflect.TypeFor[SuppressionAdded]()),
	}
)

// jsonKeys are the JSON names of t's fields, in declaration order.
func jsonKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// reorder re-encodes the object raw with the keys of order first, then the others in the order
// raw has them.
func reorder(raw json.RawMessage, order []string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw, false
	}
	keys, ok := objectKeys(raw)
	if !ok {
		return raw, false
	}
	sortBy(keys, order)
	return encodeOrdered(m, keys), true
}

// sortBy puts the keys order names first, in its order; the others keep theirs, after them.
func sortBy(keys, order []string) {
	rank := func(key string) int {
		if i := slices.Index(order, key); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(keys, func(a, b string) int { return rank(a) - rank(b) })
}

// objectKeys lists the keys of the JSON object raw in the order they appear.
func objectKeys(raw []byte) ([]string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, false
		}
	}
	return keys, true
}

func encodeOrdered(m map[string]json.RawMessage, keys []string) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(k)
		b.Write(name)
		b.WriteByte(':')
		b.Write(m[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}
