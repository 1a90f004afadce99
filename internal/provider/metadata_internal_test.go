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
		got, ok := flatStrings([]byte(raw))
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
		if !reflect.DeepEqual(got, m.entries) {
			t.Errorf("flatStrings(%s) = %v, Set reads %v", raw, got, m.entries)
		}
	}
}

// flatTags reads an array of strings as the decoder does, adds them as Tag does, and refuses
// anything else without adding anything.
func TestFlatTags(t *testing.T) {
	for raw, want := range map[string]bool{
		`["a","b"]`:                      true,
		` [ " a " , "b,]" ] `:            true,
		`["es\"c]aped","\u00e9t\u00e9"]`: true,
		`["café",""]`:                    true,
		`[]`:                             true,
		`["a",7]`:                        false,
		`["a",null]`:                     false,
		`["a",["b"]]`:                    false,
		`["a"`:                           false,
		`["a",]`:                         false,
		`["a"] trailing`:                 false,
		`{"a":"b"}`:                      false,
	} {
		before := []string{"kept"}
		got, ok := flatTags([]byte(raw), before)
		if ok != want {
			t.Errorf("flatTags(%s) ok = %v, want %v", raw, ok, want)
			continue
		}
		if !ok {
			if !reflect.DeepEqual(got, before) {
				t.Errorf("flatTags(%s) refused but left %q", raw, got)
			}
			continue
		}
		// The decoder's reading, each added as Tag adds it.
		var strs []string
		if err := json.Unmarshal([]byte(raw), &strs); err != nil {
			t.Fatal(err)
		}
		m := Metadata{tags: []string{"kept"}}
		for _, s := range strs {
			m.Tag(s)
		}
		if !reflect.DeepEqual(got, m.tags) {
			t.Errorf("flatTags(%s) = %q, the decoder and Tag read %q", raw, got, m.tags)
		}
	}
}
