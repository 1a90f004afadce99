package provider

import (
	"encoding/json"
	"reflect"
	"testing"
)

// flatStrings reads a flat object as Set reads each member, and refuses anything else.
func TestFlatStrings(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"a":"x","b":"y"}`:             true,
		` { "a" : "x:1" , "b":"{" } `:   true,
		`{"a":"es\"c:aped","b":"z"}`:    true,
		`{"caf\u00e9":"\u00e9t\u00e9"}`: true,
		`{"a":"x","a":"y"}`:             true,
		`{}`:                            true,
		`{"a":2}`:                       true,
		`{"a":null}`:                    true,
		`{"a":"x","b":{"c":"d"}}`:       false,
		`{"a":["x"]}`:                   false,
		`{"a":true}`:                    true,
		`{"a":2x}`:                      false,
		`{"a":"x"`:                      false,
		`{"a":"x",}`:                    false,
		`{"a":"x"} trailing`:            false,
		`["a"]`:                         false,
	} {
		got, order, ok := flatStrings([]byte(raw))
		if ok != want {
			t.Errorf("flatStrings(%s) ok = %v, want %v", raw, ok, want)
			continue
		}
		if !ok {
			continue
		}
		// The general path's reading, for comparison.
		var m Metadata
		var o map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &o); err != nil {
			t.Fatal(err)
		}
		for k, v := range o {
			m.Set(k, v)
		}
		if m.entries == nil {
			m.entries = map[string]string{}
		}
		if !reflect.DeepEqual(got, m.entries) || len(order) != len(m.entries) {
			t.Errorf("flatStrings(%s) = %v %v, Set reads %v", raw, got, order, m.entries)
		}
	}
}
