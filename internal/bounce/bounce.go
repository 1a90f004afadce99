// Package bounce turns what a provider says about a bounce or a failed delivery (the SMTP reply
// code, the RFC 3463 enhanced status code, the remote server's text, the provider's own
// classification) into domain.Bounce: the same details for every provider and one category from a
// fixed list, plus a hard/soft bounce type that does not contradict the remote server.
//
// It is pure: no I/O, no configuration, no clock. docs/PROVIDERS.md ("Bounce classification")
// documents the rules; the tables in this package are the rules.
package bounce

import (
	"strings"

	"github.com/mailhook/mailhook/internal/domain"
)

// Categories. Each says why a message bounced, not whether to retry: BounceType says that.
const (
	UnknownUser      = "unknown_user"      // the mailbox does not exist or is disabled
	MailboxFull      = "mailbox_full"      // over quota
	DomainInvalid    = "domain_invalid"    // the recipient's domain does not exist or takes no mail
	PolicyBlock      = "policy_block"      // refused by the receiver's policy (relaying, access, sender address)
	SpamBlock        = "spam_block"        // refused as spam, or for the sender's reputation (block lists)
	ContentRejected  = "content_rejected"  // the message's content or media (virus, attachment, encoding)
	AuthFailure      = "auth_failure"      // the sender failed authentication (DMARC, SPF, DKIM, reverse DNS)
	TooLarge         = "too_large"         // the message exceeds a size limit
	TemporaryFailure = "temporary_failure" // a transient condition: retry later
	Undetermined     = "undetermined"      // nothing said which
)

// Categories lists every category Classify returns.
var Categories = []string{
	UnknownUser, MailboxFull, DomainInvalid, PolicyBlock, SpamBlock,
	ContentRejected, AuthFailure, TooLarge, TemporaryFailure, Undetermined,
}

// Rule names the step of Classify that decided the category.
type Rule string

const (
	RuleEnhancedCode Rule = "enhanced_code" // the RFC 3463 code (codes.go)
	RuleDiagnostic   Rule = "diagnostic"    // a keyword of the remote server's text (text.go)
	RuleSMTPCode     Rule = "smtp_code"     // the RFC 5321 reply code (codes.go)
	RuleProvider     Rule = "provider"      // the provider's own classification (provider.go)
	RuleTransient    Rule = "transient"     // only that a code of class 4 said "temporary"
	RuleNone         Rule = "none"          // nothing: Undetermined
)

// Input is what a provider said about one recipient's bounce or failure. Every field is optional.
type Input struct {
	// SMTPCode is a reply code the provider carries in a field of its own (Mailgun's
	// delivery-status.code). Values that are not an SMTP reply code (Mailgun's own 605) are
	// ignored; without a valid one, the code is read from Diagnostic.
	SMTPCode int
	// EnhancedCode is an RFC 3463 code the provider carries in a field of its own (SES's and
	// SendGrid's status). When absent or invalid, or when it says only X.0.0 and Diagnostic names
	// a more specific one, the code is read from Diagnostic.
	EnhancedCode string
	// Diagnostic is the remote server's reply or the DSN's Diagnostic-Code, as the provider
	// passed it on ("smtp; 550 5.1.1 <x@example.com>: Recipient address rejected").
	Diagnostic string
	// ProviderBounceType is the provider's own hard or soft (domain.BounceHard, domain.BounceSoft)
	// or "". Apply defaults it to the event's BounceType.
	ProviderBounceType string
	// ProviderReasons are the provider's own classification strings, most specific first (SES
	// bounceSubType then bounceType, SendGrid bounce_classification then type, Postmark Type,
	// Mailgun reason then severity). They decide the category only when neither the codes nor the
	// text did (provider.go lists the ones that mean something).
	ProviderReasons []string
	// Dropped says the provider never handed the message to a receiving server (a suppressed
	// address, a rejected send, a template that failed to render). Its text is then the
	// provider's, not a server's: no code is read from it and no keyword, because "Recipient
	// List over Package Quota" is not a full mailbox. Only ProviderReasons can categorize it.
	Dropped bool
	// Explanation is the provider's fixed sentence for its own classification (Resend's
	// bounce.message: SES's description of the subType), not a server's reply. When nothing else
	// carries a code or a text it is kept as the diagnostic, but never read for codes or
	// keywords: "…can have a negative impact on your reputation as a sender" is advice to the
	// sender, not a spam block. Only ProviderReasons categorize it.
	Explanation string
}

// explained reports whether the provider's fixed sentence is all the text there is.
func (in Input) explained() bool {
	return in.SMTPCode == 0 && strings.TrimSpace(in.EnhancedCode) == "" && strings.TrimSpace(in.Diagnostic) == "" &&
		strings.TrimSpace(in.Explanation) != ""
}

// empty reports whether the provider said nothing Classify could use: no code, no text, and
// no reason that names a category ("Permanent", "General" alone say only what BounceType says).
func (in Input) empty() bool {
	if in.explained() {
		return false
	}
	if in.SMTPCode != 0 || strings.TrimSpace(in.EnhancedCode) != "" || strings.TrimSpace(in.Diagnostic) != "" {
		return false
	}
	_, rule := providerCategory(in.ProviderReasons)
	return rule != RuleProvider
}

// Result is what Classify concludes.
type Result struct {
	// Bounce holds the codes actually found (0 and "" when none), the cleaned and truncated
	// diagnostic, and the category.
	Bounce domain.Bounce
	// BounceType is hard, soft or "" (see bounceType).
	BounceType string
	// Rule is the step that decided Bounce.Category.
	Rule Rule
}

// Classify normalizes in. The category comes from, in order: the enhanced code; keywords of
// the diagnostic; the basic reply code; the provider's classification; a class-4 code
// (temporary_failure); else undetermined. It reads only the cleaned, truncated diagnostic, so
// a stored domain.Bounce classifies the same way again.
func Classify(in Input) Result {
	if in.explained() {
		in.Diagnostic, in.Dropped = in.Explanation, true // read the same way as a dropped message's text
	}
	b := domain.Bounce{Diagnostic: CleanDiagnostic(in.Diagnostic)}
	if in.Dropped {
		cat, rule := providerCategory(in.ProviderReasons)
		b.Category = cat
		return Result{Bounce: b, BounceType: normalType(in.ProviderBounceType), Rule: rule}
	}
	b.SMTPCode = pickSMTPCode(in.SMTPCode, b.Diagnostic)
	code := pickEnhancedCode(in.EnhancedCode, b.Diagnostic)
	b.EnhancedCode = code.String()
	class := replyClass(b.SMTPCode, code)

	cat, rule := categorize(class, b.SMTPCode, code, b.Diagnostic, in.ProviderReasons)
	b.Category = cat
	return Result{Bounce: b, BounceType: bounceType(class, cat, normalType(in.ProviderBounceType)), Rule: rule}
}

func categorize(class, smtp int, code enhanced, diag string, reasons []string) (string, Rule) {
	if c := code.category(diag); c != "" {
		return c, RuleEnhancedCode
	}
	if c := textCategory(diag); c != "" {
		return c, RuleDiagnostic
	}
	if c := smtpCategory(smtp); c != "" {
		return c, RuleSMTPCode
	}
	if c, rule := providerCategory(reasons); rule == RuleProvider {
		return c, rule
	}
	if class == 4 {
		return TemporaryFailure, RuleTransient
	}
	return Undetermined, RuleNone
}

// replyClass is 4 (transient) or 5 (permanent) from the reply code, which is what the sending
// server acted on (RFC 5321 §4.2.1), else from the enhanced code; 0 when neither says.
func replyClass(smtp int, code enhanced) int {
	if c := smtp / 100; c == 4 || c == 5 {
		return c
	}
	if code.class == 4 || code.class == 5 {
		return code.class
	}
	return 0
}

// bounceType derives hard or soft. "Hard" suppresses the address everywhere (README,
// Suppressions), so it must mean "this address is bad", not only "this message failed for good":
//
//   - class 4: soft, whatever the provider said. The remote server called the failure
//     transient, so the address is not proven bad (Mailgun's "old": retries ran out).
//   - class 5, unknown_user or domain_invalid: hard, whatever the provider said. The server
//     said for good that the mailbox or the domain does not exist.
//   - class 5, mailbox_full or temporary_failure: soft. RFC 3463 calls X.2.2 a persistent
//     transient failure; 5.4.7 (delivery time expired) ends retries of transient failures.
//   - class 5, any other category: the provider's type when it gave one (a permanent refusal of
//     the sender or of the content says nothing about the address; either reading is
//     consistent). Without one: hard when the category is undetermined (the plain "5xx is a
//     hard bounce"), soft otherwise (policy, spam, authentication, content, size: suppressing
//     the recipient would not fix the sender's problem).
//   - no code: the provider's type, possibly "".
func bounceType(class int, category, provider string) string {
	switch class {
	case 4:
		return domain.BounceSoft
	case 5:
		switch category {
		case UnknownUser, DomainInvalid:
			return domain.BounceHard
		case MailboxFull, TemporaryFailure:
			return domain.BounceSoft
		}
		if provider != "" {
			return provider
		}
		if category == Undetermined {
			return domain.BounceHard
		}
		return domain.BounceSoft
	}
	return provider
}

func normalType(t string) string {
	switch strings.ToLower(strings.TrimSpace(t)) {
	case domain.BounceHard:
		return domain.BounceHard
	case domain.BounceSoft:
		return domain.BounceSoft
	}
	return ""
}

// Apply fills ev.Bounce on a bounced or failed event from in, and on a bounced event replaces
// ev.BounceType with Classify's. in.ProviderBounceType defaults to ev.BounceType, the type the
// adapter mapped from the provider's own words. Other events, and an Input with nothing in it
// (see empty), are left as they are: a nil Bounce means the provider said nothing.
func Apply(ev *domain.Event, in Input) {
	if ev.Status != domain.StatusBounced && ev.Status != domain.StatusFailed {
		return
	}
	if in.empty() {
		return
	}
	if in.ProviderBounceType == "" {
		in.ProviderBounceType = ev.BounceType
	}
	r := Classify(in)
	ev.Bounce = &r.Bounce
	if ev.Status == domain.StatusBounced {
		ev.BounceType = r.BounceType
	}
}
