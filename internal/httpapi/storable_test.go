package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/event"
)

// TestStorable: what PostgreSQL refuses (invalid UTF-8 or NUL in text; \u0000 or an unpaired
// surrogate escape in jsonb) is refused before a workflow starts; everything else passes. The
// jsonb rules were checked against PostgreSQL 15 (SELECT $1::jsonb) on random escape mixes.
func TestStorable(t *testing.T) {
	tests := []struct {
		raw    string
		id     string
		refuse string // substring of the error, "" = storable
	}{
		{raw: `{"a":"plain"}`},
		{raw: `{"a":"caf\u00e9 \ud83d\ude00 \uD83D\uDE00 \u0001 \\u0000 \\\\ud800"}`},
		{raw: `{"a":"\u0000"}`, refuse: `\u0000`},
		{raw: `{"a":"\ud800"}`, refuse: "surrogate"},
		{raw: `{"a":"\ud800x"}`, refuse: "surrogate"},
		{raw: `{"a":"\ud800\ud800"}`, refuse: "surrogate"},
		{raw: `{"a":"\ud800\n"}`, refuse: "surrogate"},
		{raw: `{"a":"\udc00"}`, refuse: "surrogate"},
		{raw: `{"a":"\ude00\ud83d"}`, refuse: "surrogate"},
		{raw: `{"a":"\\\u0000"}`, refuse: `\u0000`},
		{raw: "{\"a\":\"caf\xe9\"}", refuse: "UTF-8"},
		{raw: "{\"a\":\"\xed\xa0\x80\"}", refuse: "UTF-8"},
		{raw: `{"a":1}`, id: "evt\x00", refuse: "NUL"},
		{raw: `{"a":1}`, id: "evt\xff", refuse: "UTF-8"},
	}
	for _, tc := range tests {
		ev := event.Event{EventID: "evt_1", Raw: json.RawMessage(tc.raw)}
		if tc.id != "" {
			ev.EventID = tc.id
		}
		err := storable(ev)
		switch {
		case tc.refuse == "" && err != nil:
			t.Errorf("%q: refused (%v), want storable", tc.raw, err)
		case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
			t.Errorf("%q id %q: %v, want an error mentioning %q", tc.raw, tc.id, err, tc.refuse)
		}
	}
}
