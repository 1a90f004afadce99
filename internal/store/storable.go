package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mailhook/mailhook/internal/domain"
)

// Limits of what an event may carry. Each is well under what the columns, their btree indexes
// (a key of at most ~2,700 bytes) and Temporal (a workflow id of at most 1,000 bytes, a keyword
// search attribute of at most 2,048) accept, so an event that passes Storable can be inserted,
// started and applied. docs/API.md, "What can be stored", lists them.
const (
	MaxEventIDBytes    = 255 // webhook_events key, workflow id provider:event_id
	MaxMessageIDBytes  = 255 // messages key, the MessageID search attribute
	MaxTypeBytes       = 255 // the EventType search attribute
	MaxRecipientBytes  = 320 // suppressions key; RFC 5321 allows 64 + 1 + 255
	MaxBounceTypeBytes = 64
	MaxProviderBytes   = 64 // the endpoint or provider name events are keyed under
	// MaxJSONDepth bounds the nesting of a payload. PostgreSQL's jsonb parser recurses per level
	// and stops at max_stack_depth (100,000 levels fail with the default 2 MB); no provider
	// nests deeper than a handful.
	MaxJSONDepth = 512
)

// PostgreSQL's numeric, which jsonb stores every number as, holds at most 16,383 digits after
// the decimal point and a leading digit at most at 10^131071; it refuses exponents of
// INT_MAX/2 or more outright (numeric.c, set_var_from_str and make_result).
const (
	numericMaxScale    = 16383
	numericMaxExponent = 131071
	numericMaxRawExp   = 1<<30 - 1
)

// Storable returns nil when ev can be recorded, started and applied, or an error wrapping
// domain.ErrNotStorable whose innermost message is a short reason for the sender. It is the one place
// the edge asks; the store's own inserts are the backstop for anything it misses.
func Storable(ev domain.Event) error {
	if err := storable(ev); err != nil {
		return fmt.Errorf("%w: %w", domain.ErrNotStorable, err)
	}
	return nil
}

func storable(ev domain.Event) error {
	if ev.EventID == "" {
		return errors.New("event id is empty")
	}
	for _, f := range [...]struct {
		name, v string
		max     int
	}{
		{"provider", ev.Provider, MaxProviderBytes},
		{"event id", ev.EventID, MaxEventIDBytes},
		{"type", ev.Type, MaxTypeBytes},
		{"message id", ev.MessageID, MaxMessageIDBytes},
		{"recipient", ev.Recipient, MaxRecipientBytes},
		{"bounce type", ev.BounceType, MaxBounceTypeBytes},
	} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%s is not valid UTF-8", f.name)
		}
		if strings.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("%s contains NUL", f.name)
		}
		if len(f.v) > f.max {
			return fmt.Errorf("%s is %d bytes, more than %d", f.name, len(f.v), f.max)
		}
	}
	if err := storableBounce(ev.Bounce); err != nil {
		return err
	}
	if !ev.OccurredAt.IsZero() {
		// The normalized event is JSON, and encoding/json writes years 0 to 9999 only;
		// timestamptz would also refuse far beyond that.
		if y := ev.OccurredAt.Year(); y < 1 || y > 9999 {
			return fmt.Errorf("occurred_at year %d is outside 1 to 9999", y)
		}
	}
	if !utf8.Valid(ev.Raw) {
		return errors.New("payload is not valid UTF-8")
	}
	return jsonbStorable(ev.Raw)
}

// jsonbStorable checks a JSON text the way PostgreSQL's jsonb input does, for what
// encoding/json accepts and jsonb refuses: the escape \u0000, unpaired UTF-16 surrogate escapes
// (encoding/json decodes both to U+FFFD), numbers numeric cannot hold, and nesting deeper than
// MaxJSONDepth. Syntax errors are left to the parser that already read it.
func jsonbStorable(raw []byte) error {
	depth := 0
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			end, err := jsonbString(raw, i+1)
			if err != nil {
				return err
			}
			i = end
		case c == '{' || c == '[':
			depth++
			if depth > MaxJSONDepth {
				return fmt.Errorf("payload nests deeper than %d levels", MaxJSONDepth)
			}
		case c == '}' || c == ']':
			depth--
		case c == '-' || ('0' <= c && c <= '9'):
			end := i + 1
			for end < len(raw) && isNumberByte(raw[end]) {
				end++
			}
			if err := numericFits(raw[i:end]); err != nil {
				return err
			}
			i = end - 1
		}
	}
	return nil
}

// jsonbString checks the escapes of the string starting at raw[i] (after its opening quote) and
// returns the index of its closing quote.
func jsonbString(raw []byte, i int) (int, error) {
	for ; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			return i, nil
		case '\\':
			i++ // the escaped character
			if i >= len(raw) || raw[i] != 'u' {
				continue
			}
			r, ok := hex4(raw, i+1)
			if !ok {
				continue // not a valid escape; the JSON parser has already refused it
			}
			i += 4
			switch {
			case r == 0:
				return 0, errors.New(`payload contains \u0000`)
			case r >= 0xDC00 && r <= 0xDFFF:
				return 0, errors.New("payload contains an unpaired UTF-16 surrogate escape")
			case r >= 0xD800 && r <= 0xDBFF:
				if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
					return 0, errors.New("payload contains an unpaired UTF-16 surrogate escape")
				}
				lo, ok := hex4(raw, i+3)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return 0, errors.New("payload contains an unpaired UTF-16 surrogate escape")
				}
				i += 6
			}
		}
	}
	return len(raw), nil
}

func isNumberByte(c byte) bool {
	return ('0' <= c && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// numericFits reports whether PostgreSQL's numeric holds the JSON number num: at most
// numericMaxScale digits after the point (zero included: 0e-16384 overflows), a nonzero value's
// leading digit at most at 10^numericMaxExponent, and an exponent under numericMaxRawExp.
func numericFits(num []byte) error {
	s := string(num)
	s = strings.TrimPrefix(s, "-")
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	e := 0
	if hasExp {
		neg := strings.HasPrefix(exp, "-")
		exp = strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")
		if len(exp) > 10 {
			return fmt.Errorf("payload number %s overflows PostgreSQL's numeric", abbreviate(num))
		}
		for _, d := range exp {
			if d < '0' || d > '9' {
				return nil // not a number; the JSON parser has already refused it
			}
			e = e*10 + int(d-'0')
		}
		if e >= numericMaxRawExp {
			return fmt.Errorf("payload number %s overflows PostgreSQL's numeric", abbreviate(num))
		}
		if neg {
			e = -e
		}
	}
	if scale := len(frac) - e; scale > numericMaxScale {
		return fmt.Errorf("payload number %s has more than %d digits after the point", abbreviate(num), numericMaxScale)
	}
	lead := 0 // the power of ten of the leading nonzero digit, before the exponent
	if t := strings.TrimLeft(intPart, "0"); t != "" {
		lead = len(t) - 1
	} else {
		k := strings.IndexFunc(frac, func(r rune) bool { return r != '0' })
		if k < 0 {
			return nil // zero: no weight to overflow
		}
		lead = -(k + 1)
	}
	if lead+e > numericMaxExponent {
		return fmt.Errorf("payload number %s is larger than PostgreSQL's numeric holds", abbreviate(num))
	}
	return nil
}

// abbreviate keeps a reason short whatever the number's length.
func abbreviate(num []byte) string {
	if len(num) <= 24 {
		return string(num)
	}
	return string(num[:10]) + "…" + string(num[len(num)-10:])
}

// hex4 decodes the four hex digits at raw[at:].
func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[at : at+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
