package notify

import (
	"bytes"
	"encoding/json"
	"io"
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
	env, ok := members(body)
	if !ok {
		return body
	}
	for i, m := range env {
		if m.key != "data" {
			continue
		}
		var typ string
		if t, ok := find(env, "type"); ok {
			_ = json.Unmarshal(t, &typ)
		}
		if order, ok := dataOrder[typ]; ok {
			if data, ok := members(m.raw); ok {
				sortBy(data, order)
				env[i].raw = encode(data)
			}
		}
	}
	sortBy(env, envelopeOrder)
	return encode(env)
}

var (
	envelopeOrder = jsonKeys(reflect.TypeFor[Envelope]())
	dataOrder     = map[string][]string{
		domain.TypeStatusChanged:       jsonKeys(reflect.TypeFor[StatusChanged]()),
		domain.TypeEmailReceived:       jsonKeys(reflect.TypeFor[EmailReceived]()),
		domain.TypeSuppressionAdded:    jsonKeys(reflect.TypeFor[SuppressionAdded]()),
		domain.TypeMessageOpened:       jsonKeys(reflect.TypeFor[Engagement]()),
		domain.TypeMessageClicked:      jsonKeys(reflect.TypeFor[Engagement]()),
		domain.TypeMessageUnsubscribed: jsonKeys(reflect.TypeFor[Engagement]()),
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

// member is one key of a JSON object with its value as it was written.
type member struct {
	key string
	raw json.RawMessage
}

// members lists the members of the JSON object raw in the order they appear, in one pass (a
// drain orders thousands of bodies a second). A key given twice keeps its first place and its
// last value, as decoding into a map would.
func members(raw []byte) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if i := slices.IndexFunc(out, func(m member) bool { return m.key == key }); i >= 0 {
			out[i].raw = v
			continue
		}
		out = append(out, member{key, v})
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // something after the object
	}
	return out, true
}

func find(ms []member, key string) (json.RawMessage, bool) {
	for _, m := range ms {
		if m.key == key {
			return m.raw, true
		}
	}
	return nil, false
}

// sortBy puts the keys order names first, in its order; the others keep theirs, after them.
func sortBy(ms []member, order []string) {
	rank := func(key string) int {
		if i := slices.Index(order, key); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(ms, func(a, b member) int { return rank(a.key) - rank(b.key) })
}

func encode(ms []member) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(m.key)
		b.Write(name)
		b.WriteByte(':')
		b.Write(m.raw)
	}
	b.WriteByte('}')
	return b.Bytes()
}
