package providercounts

import "time"

// Tolerance is how far a provider's count may be from what was received before it is a gap:
// at most Absolute events or Fraction of the provider's count, whichever is larger. Counts that
// a provider keeps in another time zone (Postmark) or per deferral (SendGrid) need one.
type Tolerance struct {
	Absolute int64   `json:"absolute,omitempty"`
	Fraction float64 `json:"fraction,omitempty"`
}

// Comparison is one line of a provider's day beside what mailhook received for it.
type Comparison struct {
	Line
	Received int64 `json:"received"`
	// Gap is the provider's count minus what was received: positive when webhooks are missing,
	// negative when mailhook received more than the provider counted (re-sent events that
	// were new to mailhook, or a count kept in another day).
	Gap int64 `json:"gap"`
	// Within reports whether the gap is inside the tolerance.
	Within bool `json:"within"`
}

// Compare sets each line beside what was received (event type → count, as the daily report
// counts them) under the tolerance for its metric (tol[metric], else def).
func Compare(lines []Line, received map[string]int64, tol map[string]Tolerance, def Tolerance) []Comparison {
	out := make([]Comparison, len(lines))
	for i, l := range lines {
		t, ok := tol[l.Metric]
		if !ok {
			t = def
		}
		got := l.Received(received)
		gap := l.Count - got
		allowed := max(t.Absolute, int64(t.Fraction*float64(l.Count)))
		out[i] = Comparison{Line: l, Received: got, Gap: gap, Within: gap <= allowed && -gap <= allowed}
	}
	return out
}

// States of a Check.
const (
	// StateOK: the provider answered; Lines hold the comparison.
	StateOK = "ok"
	// StateUnavailable: the provider's API did not answer, answered 5xx or asked to slow down,
	// through every retry. Not a count: the day is not compared.
	StateUnavailable = "unavailable"
	// StateRefused: the provider's API refused the request (credentials, permissions, an
	// answer not in its documented shape); retrying cannot help until the configuration changes.
	StateRefused = "refused"
)

// Check is one endpoint's comparison for one UTC day, as the daily reconciliation stores it.
type Check struct {
	Date     string `json:"date"`
	Endpoint string `json:"endpoint"`
	// Provider is the namespace the endpoint's events are received under (the daily counts'
	// provider column).
	Provider string `json:"provider"`
	State    string `json:"state"`
	// Error says why the provider's counts are missing (mailhook's own words: the provider
	// and the HTTP status, never the API's body).
	Error string       `json:"error,omitempty"`
	Lines []Comparison `json:"lines,omitempty"`
	// Gaps counts the lines outside their tolerance.
	Gaps      int       `json:"gaps"`
	CheckedAt time.Time `json:"checked_at"`
}

// GapsOf counts the comparisons outside their tolerance.
func GapsOf(c []Comparison) int {
	n := 0
	for _, l := range c {
		if !l.Within {
			n++
		}
	}
	return n
}
