package bounce

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mailhook/mailhook/internal/domain"
)

// CleanDiagnostic makes provider text storable and bounded: invalid UTF-8 and control
// characters (NUL among them: PostgreSQL text refuses it) are dropped, runs of white space
// (the line breaks of a multi-line reply) become one space, and the result is cut to
// domain.MaxDiagnosticBytes on a character boundary.
func CleanDiagnostic(s string) string {
	var b strings.Builder
	space := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			continue
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case unicode.IsControl(r):
			continue
		}
		n := utf8.RuneLen(r)
		if space {
			n++
		}
		if b.Len()+n > domain.MaxDiagnosticBytes {
			break
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// words compiles phrases into one case-insensitive pattern matched on word boundaries, so
// "spf" does not match inside another word and "quota" not inside "reached_daily_quota".
func words(phrases ...string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(?:` + strings.Join(phrases, "|") + `)\b`)
}

func matches(re *regexp.Regexp, s string) bool { return s != "" && re.MatchString(s) }

// Keyword lists, in the order textCategory tries them: a reply that names the sender's
// authentication or a spam verdict says why before anything else it says ("blocked", "try
// again"), and a domain that does not exist before a user that does not ("domain does not
// exist").
var (
	authWords = words(`dmarc`, `spf`, `dkim`, `unauthenticated`, `authentication`, `reverse dns`, `ptr records?`)
	spamWords = words(`spam`, `spamhaus`, `spamcop`, `black ?list(ed)?`, `block ?list(ed)?`, `deny ?list(ed)?`,
		`rbl`, `dnsbl`, `reputation`, `unsolicited`, `bulk mail`, `phish(ing)?`, `complaints`)
	domainWords = words(`domain (name )?not found`, `domain (\S+ )?(does not|doesn't) exist`, `no such domain`, `unknown domain`,
		`no mx`, `null mx`, `host not found`, `host unknown`, `unroutable`, `unrouteable`, `nxdomain`, `name or service not known`)
	userWords = words(`user unknown`, `unknown user`, `unknown recipient`, `recipient unknown`, `addressee unknown`,
		`no such (user|recipient|mailbox|address|account|person)`, `(user|recipient|mailbox|address) not found`,
		`does not exist`, `doesn't exist`, `no mailbox`, `mailbox (unavailable|not available|disabled|inactive)`,
		`invalid (recipient|mailbox|user|e-?mail address|address)`, `not a valid (recipient|mailbox|user)`,
		`(account|mailbox) (is |has been )?(disabled|deactivated|suspended|inactive)`, `user doesn't have`)
	fullWords    = words(`mailbox (is )?full`, `full mailbox`, `inbox (is )?full`, `quota`, `mailbox size`, `storage allocation`, `out of storage`)
	sizeWords    = words(`too large`, `too big`, `message size`, `size limit`, `size exceeds`, `exceeds (the )?(maximum |max )?(message )?size`, `message length`)
	contentWords = words(`virus`, `malware`, `infected`, `content (rejected|refused|not accepted|filter)`, `message content`, `bad content`, `attachments?`)
	policyWords  = words(`blocked`, `policy`, `access denied`, `relay(ing)? (denied|not permitted)`, `relay access denied`,
		`not (permitted|allowed|authorized)`, `(message|mail|delivery) refused`, `prohibited`)
	temporaryWords = words(`try again`, `try later`, `come back later`, `temporar(y|ily)`, `timed out`, `time-?out`,
		`connection (refused|reset|lost|closed|dropped)`, `too many (connections|messages|sessions)`, `rate limit(ed)?`,
		`throttl(ed|ing)`, `gr[ae]ylist(ed|ing)?`, `deferred`)
)

var textRules = []struct {
	category string
	words    *regexp.Regexp
}{
	{AuthFailure, authWords},
	{SpamBlock, spamWords},
	{DomainInvalid, domainWords},
	{UnknownUser, userWords},
	{MailboxFull, fullWords},
	{TooLarge, sizeWords},
	{ContentRejected, contentWords},
	{PolicyBlock, policyWords},
	{TemporaryFailure, temporaryWords},
}

// textCategory is the category of the first keyword list the diagnostic matches, or "".
func textCategory(diag string) string {
	for _, r := range textRules {
		if matches(r.words, diag) {
			return r.category
		}
	}
	return ""
}

// StreamName cleans a provider's stream, tag or category name for domain.Stream: trimmed, and
// "" when it is no name at all (control characters, or longer than MaxStreamBytes), so a
// malformed value falls back to the global suppression scope instead of failing the event.
func StreamName(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > MaxStreamBytes || !utf8.ValidString(s) {
		return ""
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return ""
		}
	}
	return s
}

// MaxStreamBytes bounds a stream name: Postmark's stream ids and SES configuration-set names
// are far shorter (SES allows 64 characters).
const MaxStreamBytes = 255
