package jsonfield

import (
	"encoding/json"
	"testing"
	"time"
)

func TestParseEpoch(t *testing.T) {
	for s, want := range map[string]time.Time{
		"1534108637.153125": time.Unix(1534108637, 153125000).UTC(), // exact: no float rounding
		"1600112492":        time.Unix(1600112492, 0).UTC(),
		"1.6e9":             time.Unix(1600000000, 0).UTC(),
		"0":                 {}, "-5": {}, "": {}, "abc": {}, "NaN": {},
		"253402300800": {}, // after 9999-12-31
	} {
		got, ok := ParseEpoch(s)
		if !got.Equal(want) || ok == want.IsZero() {
			t.Errorf("ParseEpoch(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
}

func TestFields(t *testing.T) {
	var o Object
	if err := json.Unmarshal([]byte(`{"s":" x ","n":5,"null":null,"ts":"1600112492","tn":1600112492.5}`), &o); err != nil {
		t.Fatal(err)
	}
	if OptionalString(o, "s") != "x" || OptionalString(o, "n") != "" || OptionalString(o, "missing") != "" {
		t.Error("OptionalString")
	}
	if !IsNull(o["null"]) || IsNull(o["s"]) {
		t.Error("IsNull")
	}
	if !Epoch(o, "ts").Equal(time.Unix(1600112492, 0)) || !Epoch(o, "tn").Equal(time.Unix(1600112492, 5e8)) || !Epoch(o, "s").IsZero() {
		t.Error("Epoch")
	}
}

func TestFirstStringAndInt(t *testing.T) {
	for raw, want := range map[string]string{
		`" cat facts "`: "cat facts", `["", " a ", "b"]`: "a", `[1, "b"]`: "b", `[]`: "", `5`: "", `{"a":"b"}`: "", `null`: "", ``: "", `[["a"]]`: "",
	} {
		if got := FirstString(json.RawMessage(raw)); got != want {
			t.Errorf("FirstString(%s) = %q, want %q", raw, got, want)
		}
	}
	for raw, want := range map[string]int{
		`550`: 550, `"550"`: 550, `" 452 "`: 452, `550.5`: 0, `"x"`: 0, `null`: 0, ``: 0, `99999999999`: 0, `-3`: -3,
	} {
		if got := Int(json.RawMessage(raw)); got != want {
			t.Errorf("Int(%s) = %d, want %d", raw, got, want)
		}
	}
}

// String's fast path and the decoder agree on every shape.
func TestStringMatchesTheDecoder(t *testing.T) {
	for _, raw := range []string{`"plain"`, `""`, `"  padded "`, `"esc\"aped"`, `"tab\tbed"`, `"caf\u00e9"`, `"café"`,
		"\"bad \xff utf8\"", `null`, `12`, `true`, `{"a":1}`, `["a"]`, ` "spaced"`, `"`, `"unterminated`} {
		var want string
		wantOK := json.Unmarshal([]byte(raw), &want) == nil && raw != "null"
		got, ok := String([]byte(raw))
		if ok != wantOK || got != want {
			t.Errorf("String(%s) = %q, %v; the decoder: %q, %v", raw, got, ok, want, wantOK)
		}
	}
}
