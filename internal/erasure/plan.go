package erasure

// An erasure goes through phases, in the order Plan gives them: the check for a mailbox of yours
// first when it needs one, then one step per table. The workflow (workflows.Erasure) runs them in
// this order, one activity each; the store runs each in batches (store.ErasurePhase).

// Scopes: what of an address an erasure changes.
const (
	// ScopeAll erases the address everywhere (the default).
	ScopeAll = "all"
	// ScopeInbound removes only the inbound emails that mention the address, and their
	// notification bodies: for a mailbox of yours whose mail must go, while its suppressions,
	// messages and the rest stay as they are.
	ScopeInbound = "inbound"
)

// Tables are the tables an erasure changes, in the order of its steps. The suppressions and
// their lifts come last: until then the suppression check finds the address's plain rows, and
// from then on their hash, so it never finds the address unsuppressed.
var Tables = []string{
	"event_payloads", "webhook_events", "notification_bodies", "notifications",
	"messages", "message_events", "soft_bounces", "suppressions", "suppression_lifts",
	// Last, since a version that had no such step: a run begun before an upgrade replays its
	// history unchanged and then takes this step.
	"rejected_requests",
}

// inboundTables are the steps that have something to do for ScopeInbound.
var inboundTables = map[string]bool{"event_payloads": true, "webhook_events": true, "notification_bodies": true, "notifications": true,
	"rejected_requests": true}

// CheckPhase names the first phase of a job that must first know whether the address is a
// mailbox of yours (inbound emails were sent to it); CheckPhase + ":webhook_events" the second.
const CheckPhase = "check"

// Phase is one phase of an erasure: a check over one table (counting inbound emails sent to
// the address, changing nothing), or the step of one table.
type Phase struct {
	// Name is the phase's name in the job's cursor and in the Temporal UI: the table for a
	// step, "check" and "check:webhook_events" for the check.
	Name string
	// Table is the table the phase reads.
	Table string
	// Check says the phase only counts the inbound emails sent to the address.
	Check bool
	// Why is what the phase does, and why, for the Temporal UI (the step's summary).
	Why string
}

// Plan is the phases of an erasure with these settings, in order: the check when it needs one (a
// real erasure of every scope, not forced), then the steps its scope has.
func Plan(scope string, force, dryRun bool) []Phase {
	var out []Phase
	if scope == ScopeAll && !force && !dryRun {
		const why = "count the inbound emails sent to the address, changing nothing: a mailbox of yours is refused unless forced"
		out = append(out,
			Phase{Name: CheckPhase, Table: "event_payloads", Check: true, Why: why},
			Phase{Name: CheckPhase + ":webhook_events", Table: "webhook_events", Check: true, Why: why + " (rows recorded before 00009)"})
	}
	for _, table := range Tables {
		if scope == ScopeInbound && !inboundTables[table] {
			continue
		}
		out = append(out, Phase{Name: table, Table: table, Why: stepWhy[table]})
	}
	return out
}

// PhaseIndex is the position of the phase named name in phases, and 0 for "" or a name it
// does not have (a job that has not begun).
func PhaseIndex(phases []Phase, name string) int {
	for i, p := range phases {
		if p.Name == name {
			return i
		}
	}
	return 0
}

// stepWhy says what each table's step does to the rows that mention the address.
var stepWhy = map[string]string{
	"event_payloads":      "remove the inbound emails that mention the address, redact it in every other payload",
	"webhook_events":      "the same in rows recorded before 00009; redact relay and quarantine errors",
	"notification_bodies": "remove email.received bodies that mention the address, redact it in the others",
	"notifications":       "legacy bodies and the sinks' errors",
	"messages":            "empty the recipient, redact the diagnostic",
	"message_events":      "empty the recipient, redact the diagnostic and the note",
	"soft_bounces":        "delete the address's soft bounces: the escalation's count starts again",
	"rejected_requests":   "delete the refused webhook requests whose body, headers or reason mention the address",
	"suppressions":        "re-key the address's suppressions under its hash, so the check still finds it",
	"suppression_lifts":   "the lifts' address becomes the hash; their reason is redacted",
}
