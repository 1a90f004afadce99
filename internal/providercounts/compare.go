package providercounts

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
