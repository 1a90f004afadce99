package domain

// DailyCount is one (UTC day, provider, event type) line of the daily reconciliation: the events
// received that day, and how many of them are processed and still unprocessed.
type DailyCount struct {
	Date        string `json:"date"` // YYYY-MM-DD
	Provider    string `json:"provider"`
	EventType   string `json:"event_type"`
	Received    int64  `json:"received"`
	Processed   int64  `json:"processed"`
	Unprocessed int64  `json:"unprocessed"`
	// AwaitingStart counts the unprocessed events still in the inbox: accepted, but their
	// workflow is not started yet.
	AwaitingStart int64 `json:"awaiting_start"`
	// Quarantined counts the events that cannot be processed as they are (GET /v1/quarantine).
	Quarantined int64 `json:"quarantined"`
}

// DateLayout is the layout of a DailyCount's Date.
const DateLayout = "2006-01-02"

// DailyTotals sums DailyCounts.
type DailyTotals struct {
	Received    int64 `json:"received"`
	Processed   int64 `json:"processed"`
	Unprocessed int64 `json:"unprocessed"`
	// AwaitingStart is the part of Unprocessed still in the inbox.
	AwaitingStart int64 `json:"awaiting_start"`
	// Quarantined is the part of Unprocessed in quarantine.
	Quarantined int64 `json:"quarantined"`
}

// SumCounts adds up counts.
func SumCounts(counts []DailyCount) DailyTotals {
	var t DailyTotals
	for _, c := range counts {
		t.Received += c.Received
		t.Processed += c.Processed
		t.Unprocessed += c.Unprocessed
		t.AwaitingStart += c.AwaitingStart
		t.Quarantined += c.Quarantined
	}
	return t
}
