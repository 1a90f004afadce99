// Package jsonfield reads the fields of a provider's JSON object kept as raw values, for the
// adapters that decode a top-level object into map[string]json.RawMessage (SendGrid, Mailgun).
package jsonfield

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Object is a JSON object with its values undecoded.
type Object = map[string]json.RawMessage

// OptionalString returns the trimmed string at key, or "" when it is absent or not a string.
func OptionalString(o Object, key string) string {
	raw, ok := o[key]
	if !ok {
		return ""
	}
	s, _ := String(raw)
	return strings.TrimSpace(s)
}

// String decodes a JSON string; ok is false for anything else (null included). Most values
// have no escapes: those are sliced out with one allocation instead of a decoder's several (the
// accept path decodes a dozen per event). Bytes that are not UTF-8 take the decoder, which
// replaces them as it always did.
func String(raw []byte) (string, bool) {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		inner := raw[1 : n-1]
		plain := true
		for _, c := range inner {
			if c == '\\' || c == '"' || c < 0x20 || c >= utf8.RuneSelf {
				plain = false
				break
			}
		}
		if plain {
			return string(inner), true
		}
	}
	if len(raw) == 0 || raw[0] != '"' && raw[0] != ' ' && raw[0] != '\t' && raw[0] != '\r' && raw[0] != '\n' {
		return "", false
	}
	return decodeString(raw)
}

// decodeString is String's slow path, apart so that its variable, which the decoder makes
// escape, is not allocated on the fast one.
func decodeString(raw []byte) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// OptionalBool returns the boolean at key; ok is false when it is absent or not a boolean (a
// provider's 1 or "true" is not read as one).
func OptionalBool(o Object, key string) (v, ok bool) {
	raw, present := o[key]
	if !present {
		return false, false
	}
	return v, json.Unmarshal(raw, &v) == nil && !IsNull(raw)
}

// FirstString returns a string value trimmed, or the first non-blank string of an array of
// them (SendGrid's category, Mailgun's tags, Resend's diagnosticCode); "" for anything else.
// Only the top level of an array is looked into.
func FirstString(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	if s, ok := String(raw); ok {
		return strings.TrimSpace(s)
	}
	var s string
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return ""
	}
	for _, item := range list {
		if s, _ = String(item); strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// Addresses returns the addresses of a recipient field: a string, or the non-blank strings and
// {"email": …} objects of an array, trimmed, in order. Only the top level of an array is looked
// into, so a deeply nested hostile value costs one decode, not one per level.
func Addresses(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		items = []json.RawMessage{raw}
	}
	var out []string
	for _, item := range items {
		var s string
		if json.Unmarshal(item, &s) != nil {
			var obj struct {
				Email string `json:"email"`
			}
			if json.Unmarshal(item, &obj) != nil {
				continue
			}
			s = obj.Email
		}
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Int reads a whole number sent as a JSON number or a numeric string (Mailgun sends a reply code
// as 550 or "550"); 0 for anything else or anything beyond ±1e9.
func Int(raw json.RawMessage) int {
	s := strings.TrimSpace(string(raw))
	if len(s) >= 2 && s[0] == '"' {
		if json.Unmarshal(raw, &s) != nil {
			return 0
		}
		s = strings.TrimSpace(s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 1e9 || n < -1e9 {
		return 0
	}
	return n
}

// IsNull reports whether a raw value is JSON null.
func IsNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null" // compared without a copy
}

// Epoch reads unix seconds with an optional fraction (1534108637.153125), sent as a JSON number or a
// numeric string; anything else, or a value outside years 1970–9999, gives the zero time.
func Epoch(o Object, key string) time.Time {
	raw, ok := o[key]
	if !ok {
		return time.Time{}
	}
	s := strings.TrimSpace(string(raw))
	if len(s) >= 2 && s[0] == '"' {
		if json.Unmarshal(raw, &s) != nil {
			return time.Time{}
		}
	}
	t, _ := ParseEpoch(s)
	return t
}

// MaxEpoch is 9999-12-31T23:59:59Z, the latest time Epoch accepts.
const MaxEpoch = 253402300799

// ParseEpoch parses decimal seconds with an optional fraction exactly (float64 would round
// a provider's microseconds), falling back to strconv.ParseFloat for exponent forms.
func ParseEpoch(s string) (time.Time, bool) {
	if s == "" || len(s) > 64 {
		return time.Time{}, false
	}
	intPart, frac, hasFrac := strings.Cut(s, ".")
	var sec, nsec int64
	if digits(intPart) && (!hasFrac || digits(frac)) {
		if len(intPart) > 12 {
			return time.Time{}, false
		}
		sec, _ = strconv.ParseInt(intPart, 10, 64)
		for i := 0; i < 9; i++ {
			nsec *= 10
			if i < len(frac) {
				nsec += int64(frac[i] - '0')
			}
		}
	} else {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || f <= 0 || f > MaxEpoch {
			return time.Time{}, false
		}
		whole := math.Floor(f)
		sec, nsec = int64(whole), int64((f-whole)*1e9)
	}
	if sec <= 0 || sec > MaxEpoch {
		return time.Time{}, false
	}
	return time.Unix(sec, nsec).UTC(), true
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Nested returns the object at path (each key an object inside the previous one), or false when
// a key is absent or its value is not an object.
func Nested(o Object, path ...string) (Object, bool) {
	for _, key := range path {
		raw, ok := o[key]
		if !ok {
			return nil, false
		}
		var next Object
		if json.Unmarshal(raw, &next) != nil || next == nil {
			return nil, false
		}
		o = next
	}
	return o, true
}

// Time reads an RFC 3339 string at key as UTC; anything else gives the zero time: an odd
// timestamp says only when, not what, so it does not make an event unacceptable.
func Time(o Object, key string) time.Time {
	return ParseTime(OptionalString(o, key))
}

// ParseTime parses an RFC 3339 timestamp (fractions allowed) as UTC; anything else is the zero
// time.
func ParseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
