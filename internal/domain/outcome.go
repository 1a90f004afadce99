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

// RecordResult is what RecordEvent found.
type RecordResult struct {
	// Inserted: this call created the webhook_events row.
	Inserted bool `json:"inserted"`
	// AlreadyProcessed: the row existed with processed_at set; the event is a duplicate.
	AlreadyProcessed bool `json:"already_processed"`
}

// ApplyResult is the recorded outcome of applying one event to its message. A retry of
// ApplyStatus returns the outcome recorded by the first committed attempt. It does not embed
// Transition: its JSON, in ProcessWebhookEvent histories, always has from, to and version
// and puts bounce_type and recipient before version.
type ApplyResult struct {
	Outcome    Outcome `json:"outcome"`
	From       Status  `json:"from"`
	To         Status  `json:"to"`
	BounceType string  `json:"bounce_type,omitempty"`
	Recipient  string  `json:"recipient,omitempty"`
	// Version is the message's version after this event (unchanged unless moved).
	Version int64 `json:"version"`
	// Suppressed: this event added its recipient to the suppressions (false when the address
	// was already suppressed). Omitted when false, so results of events that suppress nothing
	// look as they did before suppressions existed.
	Suppressed bool `json:"suppressed,omitempty"`
}

// ProcessResult is what Process did with an event, in one transaction.
type ProcessResult struct {
	// Duplicate: the event was already processed (and this is not a replay): nothing was done.
	Duplicate bool
	// Event is the stored event (the claim the workflow's input only refers to).
	Event Event
	// Applied: the event applies to a message; Apply is its recorded outcome.
	Applied bool
	Apply   ApplyResult
	// Processed: nothing was to be notified, so the event was marked processed in the same
	// transaction.
	Processed bool
}
