package postmark

// priorDerivedID is the id versions before 2026-12-02 derived for a record without one, with the
// recipient's address in it: "<RecordType>:<MessageID>:<recipient>:<timestamp as sent>".
// Acceptance checks it (domain.Event.PriorEventID), so Postmark's retry of a record accepted by
// such a version is still a duplicate.
//
// Remove it once every row accepted by those versions is older than retention.dedupe_keys
// (400 days by default): no such key is left to match.
func priorDerivedID(recordType, messageID, recipient, stamp string) string {
	return recordType + ":" + messageID + ":" + recipient + ":" + stamp
}
