package store_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
)

// TestStorable: what PostgreSQL or Temporal would refuse is refused with a short reason; what
// they accept passes. The red-team cases of issue 12 are here: a number jsonb cannot hold, ids
// and addresses over the limits.
func TestStorable(t *testing.T) {
	ok := func() domain.Event {
		return domain.Event{Provider: "postscale", EventID: "evt_1", Type: "email.bounced", MessageID: "msg_1",
			Recipient: "user@example.com", BounceType: "hard", OccurredAt: time.Now(), Raw: json.RawMessage(`{"a":1}`)}
	}
	tests := []struct {
		name   string
		edit   func(*domain.Event)
		refuse string // substring of the reason, "" = storable
	}{
		{name: "plain"},
		{name: "escapes jsonb stores", edit: func(e *domain.Event) {
			e.Raw = json.RawMessage(`{"a":"caf\u00e9 \ud83d\ude00 \uD83D\uDE00 \u0001 \\u0000 \\\\ud800"}`)
		}},
		{name: `\u0000`, edit: func(e *domain.Event) { e.Raw = json.RawMessage(`{"a":"\u0000"}`) }, refuse: `\u0000`},
		{name: `escaped backslash then \u0000`, edit: func(e *domain.Event) { e.Raw = json.RawMessage(`{"a":"\\\u0000"}`) }, refuse: `\u0000`},
		{name: "lone high surrogate", edit: func(e *domain.Event) { e.Raw = json.RawMessage(`{"a":"\ud800"}`) }, refuse: "surrogate"},
		{name: "high surrogate then text", edit: func(e *domain.Event) { e.Raw = json.RawMessage(`{"a":"\ud800x"}`) }, refuse: "surrogate"},
		{name: "two high surrogates", edit: func(e *domain.Event) { e.Raw = json.RawMessage(`{"a":"\ud800\ud800"}`) }, refuse: "surrogate"},
		{name: "lone low surrogate", edit: func(e *domain.Event) { e.Raw = json.RawMessage(`{"a":"\udc00"}`) }, refuse: "surrogate"},
		{name: "surrogate in a key", edit: func(e *domain.Event) { e.Raw = json.RawMessage(`{"\udc00":1}`) }, refuse: "surrogate"},
		{name: "invalid UTF-8 payload", edit: func(e *domain.Event) { e.Raw = json.RawMessage("{\"a\":\"caf\xe9\"}") }, refuse: "UTF-8"},
		{name: "NUL in id", edit: func(e *domain.Event) { e.EventID = "evt\x00" }, refuse: "NUL"},
		{name: "invalid UTF-8 id", edit: func(e *domain.Event) { e.EventID = "evt\xff" }, refuse: "UTF-8"},
		{name: "empty id", edit: func(e *domain.Event) { e.EventID = "" }, refuse: "empty"},
		{name: "id at the limit", edit: func(e *domain.Event) { e.EventID = strings.Repeat("e", store.MaxEventIDBytes) }},
		{name: "1.1 KB event id", edit: func(e *domain.Event) { e.EventID = strings.Repeat("e", 1100) }, refuse: "event id is 1100 bytes"},
		{name: "3 KB message id", edit: func(e *domain.Event) { e.MessageID = strings.Repeat("m", 3000) }, refuse: "message id is 3000 bytes"},
		{name: "3 KB recipient", edit: func(e *domain.Event) { e.Recipient = strings.Repeat("r", 3000) + "@example.com" }, refuse: "recipient"},
		{name: "recipient at the limit", edit: func(e *domain.Event) { e.Recipient = strings.Repeat("r", store.MaxRecipientBytes) }},
		{name: "long type", edit: func(e *domain.Event) { e.Type = strings.Repeat("t", 300) }, refuse: "type"},
		{name: "year 10000", edit: func(e *domain.Event) { e.OccurredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, refuse: "year"},
		{name: "year 9999", edit: func(e *domain.Event) { e.OccurredAt = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC) }},
		{name: "1e1000000", edit: func(e *domain.Event) { e.Raw = json.RawMessage(`{"n":1e1000000}`) }, refuse: "larger than"},
		{name: "number in an array", edit: func(e *domain.Event) { e.Raw = json.RawMessage(`{"n":[1,2,-1e131072]}`) }, refuse: "larger than"},
		{name: "too many decimals", edit: func(e *domain.Event) { e.Raw = json.RawMessage(`{"n":1e-16384}`) }, refuse: "digits after"},
		{name: "huge exponent of zero", edit: func(e *domain.Event) { e.Raw = json.RawMessage(`{"n":0e99999999999}`) }, refuse: "overflows"},
		{name: "numbers jsonb holds", edit: func(e *domain.Event) {
			e.Raw = json.RawMessage(`{"a":1e131071,"b":-1e-16383,"c":0e1000000,"d":0.00001e131076,"e":[0,-0.5,12.25e2]}`)
		}},
		{name: "digits inside strings are not numbers", edit: func(e *domain.Event) { e.Raw = json.RawMessage(`{"a":"1e1000000"}`) }},
		{name: "deep nesting", edit: func(e *domain.Event) {
			e.Raw = json.RawMessage(strings.Repeat("[", store.MaxJSONDepth+1) + strings.Repeat("]", store.MaxJSONDepth+1))
		}, refuse: "nests deeper"},
		{name: "nesting at the limit", edit: func(e *domain.Event) {
			e.Raw = json.RawMessage(strings.Repeat("[", store.MaxJSONDepth) + strings.Repeat("]", store.MaxJSONDepth))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := ok()
			if tc.edit != nil {
				tc.edit(&ev)
			}
			err := store.Storable(ev)
			if tc.refuse == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, domain.ErrNotStorable)
			assert.Contains(t, err.Error(), tc.refuse)
			assert.Less(t, len(err.Error()), 200, "the reason is short")
		})
	}
}

// TestStorableAgreesWithPostgreSQL puts random payloads (numbers around numeric's limits, escape
// mixes) to both Storable and PostgreSQL's jsonb input: they must agree on every one.
func TestStorableAgreesWithPostgreSQL(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	r := rand.New(rand.NewPCG(12, 2026))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		return string(b)
	}
	number := func() string {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteByte('-')
		}
		switch r.IntN(3) {
		case 0:
			b.WriteByte('0')
		default:
			b.WriteByte(byte('1' + r.IntN(9)))
			b.WriteString(digits(r.IntN(6)))
		}
		if r.IntN(2) == 0 {
			b.WriteByte('.')
			b.WriteString(digits(1 + r.IntN(6)))
		}
		if r.IntN(4) > 0 {
			b.WriteByte("eE"[r.IntN(2)])
			if r.IntN(2) == 0 {
				b.WriteByte("+-"[r.IntN(2)])
			}
			// Exponents around the limits: 131071 for the leading digit, 16383 decimals.
			limits := []int{131071, 16383, 131068, 16380, 1 << 30, 5}
			e := limits[r.IntN(len(limits))] + r.IntN(13) - 6
			fmt.Fprintf(&b, "%d", max(e, 0))
		}
		return b.String()
	}
	escapes := []string{`\u0000`, `\ud800`, `\udc00`, `\ud83d\ude00`, `\\`, `\\u0000`, `\u00e9`, `x`, `\n`, `\"`}
	for i := range 600 {
		var raw string
		if i%2 == 0 {
			raw = `{"n":` + number() + `}`
		} else {
			var b strings.Builder
			for range 1 + r.IntN(4) {
				b.WriteString(escapes[r.IntN(len(escapes))])
			}
			raw = `{"s":"` + b.String() + `"}`
		}
		require.True(t, json.Valid([]byte(raw)), raw)
		ours := store.Storable(domain.Event{Provider: "p", EventID: "e", Raw: json.RawMessage(raw)})
		_, pgErr := s.Pool().Exec(t.Context(), `SELECT $1::text::jsonb`, raw)
		if (ours == nil) != (pgErr == nil) {
			short := raw
			if len(short) > 80 {
				short = short[:80] + "…"
			}
			t.Errorf("%s: Storable says %v, PostgreSQL says %v", short, ours, pgErr)
		}
	}
}
