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
