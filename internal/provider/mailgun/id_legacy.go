package mailgun

import "time"

// priorEventID is the key mailhook gave a Mailgun event before it added the day (eventID): the
// bare event-data.id. Acceptance checks it (domain.Event.PriorEventID), so a retry of an event
// accepted by an older version is still a duplicate, and the signature token an older version
// bound to it still matches.
//
// Remove it, and the checks of PriorEventID with it, once every row accepted by a version
// before the change (2026-12-02) is older than retention.dedupe_keys (400 days by default):
// no such key is left to match.
func priorEventID(id string, at time.Time) string {
	if eventID(id, at) == id {
		return ""
	}
	return id
}
