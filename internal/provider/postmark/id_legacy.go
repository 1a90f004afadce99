package postmark

import "strings"

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

// CurrentEventID is the id this version derives for the record a priorDerivedID names, and
// false for any other id: erasure re-keys the rows of those versions with it, so the address
// leaves their keys while Postmark's retry of the record stays a duplicate (it derives the
// same id). RecordType and MessageID hold no colon and an address none after its "@", so the
// first colon after the last "@" ends the recipient.
func CurrentEventID(prior string) (string, bool) {
	recordType, rest, ok := strings.Cut(prior, ":")
	if !ok {
		return "", false
	}
	messageID, rest, ok := strings.Cut(rest, ":")
	at := strings.LastIndexByte(rest, '@')
	if !ok || at < 0 {
		return "", false
	}
	end := strings.IndexByte(rest[at:], ':')
	if end < 0 {
		return "", false
	}
	recipient, stamp := rest[:at+end], rest[at+end+1:]
	return derivedID(recordType, messageID, recipient, stamp), true
}
