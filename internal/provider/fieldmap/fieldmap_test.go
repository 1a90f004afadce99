package fieldmap

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Generic paths index arrays by number and stop at anything that is not an object or array.
func TestPathLookup(t *testing.T) {
	var doc any
	dec := json.NewDecoder(strings.NewReader(`{"a":{"b":[{"c":"x"},{"c":5}],"n":null},"s":"str"}`))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]any{
		"a.b.0.c": "x", "a.b.1.c": json.Number("5"), "a.b.2.c": nil, "a.b.-1": nil, "a.b.+1": nil, "a.b.x": nil,
		"a.n": nil, "s.x": nil, "missing": nil, "a.b.1.c.d": nil,
	} {
		got, ok := Path(strings.Split(p, ".")).Lookup(doc)
		if ok != (want != nil) || got != want && want != nil {
			t.Errorf("lookup(%q) = %v, %v; want %v", p, got, ok, want)
		}
	}
}

func TestUnixSeconds(t *testing.T) {
	for s, want := range map[string]time.Time{
		"0": time.Unix(0, 0).UTC(), "1700000000": time.Unix(1700000000, 0).UTC(), "1700000000.5": time.Unix(1700000000, 5e8).UTC(),
		"1700000000.1234567891": time.Unix(1700000000, 123456789).UTC(), "": {}, "-1": {}, "1e9": {}, "1.": time.Unix(1, 0).UTC(),
		".5": {}, "9999999999999": {}, "12a": {},
	} {
		if got := unixSeconds(s); !got.Equal(want) {
			t.Errorf("unixSeconds(%q) = %v, want %v", s, got, want)
		}
	}
}
