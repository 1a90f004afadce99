package domain

// Outcome names what processing an event did. The first five are what applying it to its
// message did (recorded in message_events, so a retry returns the first attempt's); the rest end
// a run without touching a message. Outcomes are shown as the workflow result in the Temporal UI
// and counted in the metrics, so their spelling is part of the interface.
type Outcome string

const (
	OutcomeMoved    Outcome = "moved"    // the visible status changed
	OutcomeAdvanced Outcome = "advanced" // new deciding event, same visible status (no notification)
	OutcomeStale    Outcome = "stale"    // an event with a greater order key already decided
	OutcomeCounted  Outcome = "counted"  // opened/clicked: engagement counts updated
	OutcomeFlagged  Outcome = "flagged"  // unsubscribed: flag set

	OutcomeDuplicate   Outcome = "duplicate"    // already recorded and processed (durable dedupe)
	OutcomeInbound     Outcome = "inbound"      // an inbound email, notified
	OutcomeUnknownType Outcome = "unknown_type" // recorded, changes nothing
)

// Transition is what applying an event did to its message. It is embedded in the results
// histories record (Result, the Process step's output), so its JSON is theirs: add fields,
// never rename them. Outcome is omitted only when empty, which a result never is once an event
// was processed; a step that did not apply its event leaves it empty.
type Transition struct {
	Outcome Outcome `json:"outcome,omitempty"`
	From    Status  `json:"from,omitempty"`
	To      Status  `json:"to,omitempty"`
	Version int64   `json:"version,omitempty"`
	// Suppressed: the event newly suppressed its recipient.
	Suppressed bool `json:"suppressed,omitempty"`
}
