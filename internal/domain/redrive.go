package domain

import "time"

// DefaultRedriveOlderThan is how long an event may stay recorded and unprocessed before the
// daily reconciliation re-drives it.
const DefaultRedriveOlderThan = time.Hour

// DefaultRedriveLimit bounds one redrive; the next one takes the rest.
const DefaultRedriveLimit = 1000

// RedriveInput selects the events a redrive starts: recorded more than OlderThan ago and still
// unprocessed, at most Limit of them (oldest first; zero means DefaultRedriveLimit). Quarantined
// events are left out, since they fail the same way until their cause is fixed; with
// Quarantined, only they are started (after the fix). The daily reconciliation, `mailhook
// redrive` and POST /v1/redrive all take it.
type RedriveInput struct {
	OlderThan   time.Duration `json:"older_than"`
	Limit       int           `json:"limit,omitempty"`
	Quarantined bool          `json:"quarantined,omitempty"`
}

// Outcomes of one re-driven event.
const (
	RedriveStarted = "started" // its workflow was started
	RedriveRunning = "running" // its workflow is still open (or closed and not reusable): a duplicate start
	RedriveSkipped = "skipped" // recorded before webhook_events.normalized existed: nothing to start it from
	RedriveFailed  = "failed"  // the start failed (Temporal unavailable); the next redrive tries again
)

// RedriveResult is what a redrive did.
type RedriveResult struct {
	OlderThan  string `json:"older_than"`
	Considered int    `json:"considered"`
	Started    int    `json:"started"`
	Running    int    `json:"running"`
	Skipped    int    `json:"skipped"`
	Failed     int    `json:"failed"`
	// More: more stuck events than the limit; the next redrive takes them.
	More   bool             `json:"more,omitempty"`
	Events []RedriveOutcome `json:"events,omitempty"`
}

// RedriveOutcome is one event's part of a redrive.
type RedriveOutcome struct {
	Provider   string    `json:"provider"`
	EventID    string    `json:"event_id"`
	EventType  string    `json:"event_type"`
	ReceivedAt time.Time `json:"received_at"`
	Outcome    string    `json:"outcome"`
	Error      string    `json:"error,omitempty"`
}

// Add counts one event's outcome.
func (r *RedriveResult) Add(o RedriveOutcome) {
	r.Considered++
	switch o.Outcome {
	case RedriveStarted:
		r.Started++
	case RedriveRunning:
		r.Running++
	case RedriveSkipped:
		r.Skipped++
	case RedriveFailed:
		r.Failed++
	}
	r.Events = append(r.Events, o)
}

// FirstError is the first failed event's error, for a one-line summary.
func (r RedriveResult) FirstError() string {
	for _, e := range r.Events {
		if e.Error != "" {
			return e.Error
		}
	}
	return "unknown"
}
