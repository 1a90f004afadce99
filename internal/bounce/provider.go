package bounce

import "strings"

// providerReasons maps the providers' own classifications, normalized by reasonKey, to a
// category. A reason listed nowhere here ("General", "HardBounce", "bounce", "suppress-bounce")
// says nothing about the cause and leaves the category to the next rule.
var providerReasons = map[string]string{
	// SES bounceSubType and bounceType (Resend relays them as bounce.subType and bounce.type).
	"noemail":            UnknownUser, // "the email address doesn't exist"
	"suppressed":         UnknownUser, // "a recent history of bouncing as an invalid address"
	"mailboxfull":        MailboxFull,
	"messagetoolarge":    TooLarge,
	"contentrejected":    ContentRejected,
	"attachmentrejected": ContentRejected,
	"transient":          TemporaryFailure, // also Postmark's Transient
	"badcontent":         ContentRejected,  // SES Reject: the message contained a virus
	// Postmark Type.
	"softbounce":        TemporaryFailure,
	"dnserror":          TemporaryFailure, // "a temporary DNS error"
	"spamnotification":  SpamBlock,
	"virusnotification": ContentRejected,
	"dmarcpolicy":       AuthFailure,
	"blocked":           PolicyBlock, // also SendGrid's type "blocked"
	"bademailaddress":   UnknownUser,
	// SendGrid bounce_classification, in the Event Webhook's and the Bounces API's spellings.
	"invalidaddress":           UnknownUser,
	"technical":                TemporaryFailure,
	"technicalfailure":         TemporaryFailure,
	"content":                  ContentRejected,
	"reputation":               SpamBlock,
	"frequencyvolume":          TemporaryFailure,
	"frequencyorvolumetoohigh": TemporaryFailure,
	// Mailgun reason and severity.
	"espblock":  PolicyBlock,
	"old":       TemporaryFailure, // retries of temporary failures ran out
	"temporary": TemporaryFailure,
}

// reasonKey lower-cases r and keeps letters and digits: "Frequency/Volume" and "frequency
// volume", "MailboxFull" and "mailbox_full" are one key.
func reasonKey(r string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(r) {
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// providerCategory is the category of the first reason that names one.
func providerCategory(reasons []string) (string, Rule) {
	for _, r := range reasons {
		if c, ok := providerReasons[reasonKey(r)]; ok {
			return c, RuleProvider
		}
	}
	return Undetermined, RuleNone
}
