package provider

import "testing"

func TestStringValues(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"a":"x","b":"y"}`:          true,
		` { "a" : "x:1" , "b":"{"} `: true,
		`{"a":"es\"c:aped","b":"z"}`: true,
		`{}`:                         true,
		`{"a":2}`:                    false,
		`{"a":null}`:                 false,
		`{"a":"x","b":{"c":"d"}}`:    false,
		`{"a":["x"]}`:                false,
		`{"a":true}`:                 false,
		`{"a":"x"`:                   false,
	} {
		if got := stringValues([]byte(raw)); got != want {
			t.Errorf("stringValues(%s) = %v, want %v", raw, got, want)
		}
	}
}
