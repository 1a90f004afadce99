package ses

import (
	"strings"

	"github.com/mailhook/mailhook/internal/provider"
)

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

// priorRecipientMessageID is the message key versions before 2026-12-02 gave one recipient of a
// message sent to several, with the address in it: "<mail.messageId>:<lower-cased address>". The
// Process step moves a message recorded under it to the new key (domain.Event.PriorMessageID),
// so a message whose events straddle the upgrade stays one message.
//
// Remove it once no message recorded by those versions can still get an event: SES sends a
// message's events within days (a bounce at most about 14 hours after the send, a complaint days
// later), so a release or two after 2026-12-02, and at the latest after retention.messages.
func priorRecipientMessageID(mailID, key string) string {
	return mailID + ":" + key
}

// CurrentEventID is the id this version gives the event a priorRecipientEventID names, and false
// for any other id: erasure re-keys the rows of those versions with it, so the address leaves
// their keys while SNS's retry stays a duplicate. An SNS MessageId holds no colon.
func CurrentEventID(prior string) (string, bool) {
	return currentRecipientKey(prior)
}

// CurrentMessageID is the message key this version gives the message a priorRecipientMessageID
// names, and false for any other key (erasure re-keys those versions' rows with it). An SES
// mail.messageId holds no colon.
func CurrentMessageID(prior string) (string, bool) {
	return currentRecipientKey(prior)
}

// currentRecipientKey turns "<id>:<address>" into "<id>:<recipient tag>".
func currentRecipientKey(prior string) (string, bool) {
	id, key, ok := strings.Cut(prior, ":")
	if !ok || id == "" || !strings.Contains(key, "@") {
		return "", false
	}
	return id + ":" + provider.RecipientTag(id, key), true
}
