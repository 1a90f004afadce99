package ses

// priorRecipientEventID is the id versions before 2026-12-02 gave one recipient's event of a
// multi-recipient SES notification, with the address in it: "<MessageId>:<lower-cased address>".
// Acceptance checks it (domain.Event.PriorEventID), so SNS's retry of a notification accepted by
// such a version is still a duplicate.
//
// Remove it once every row accepted by those versions is older than retention.dedupe_keys
// (400 days by default): no such key is left to match.
func priorRecipientEventID(messageID, key string) string {
	return messageID + ":" + key
}
