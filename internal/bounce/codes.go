package bounce

import (
	"strconv"
	"strings"
)

// enhanced is an RFC 3463 status code class.subject.detail; class 0 means none.
type enhanced struct {
	class, subject, detail int
}

func (c enhanced) valid() bool { return c.class != 0 }

func (c enhanced) String() string {
	if !c.valid() {
		return ""
	}
	return strconv.Itoa(c.class) + "." + strconv.Itoa(c.subject) + "." + strconv.Itoa(c.detail)
}

// findEnhanced returns the first RFC 3463 code in s ("550 5.1.1 <x>: …" → 5.1.1,
// "550 #5.1.0 Address rejected" → 5.1.0). It scans for class.subject.detail with class 2, 4 or 5 and subject 0 to 7, the
// subjects RFC 3463 defines: a version number ("Exim 4.94.2") or an IP address ("192.0.2.1")
// is not a status code. The code must stand alone: no digit or '.' right before it, no digit
// and no ".<digit>" right after it.
func findEnhanced(s string) enhanced {
	for i := 0; i+5 <= len(s); i++ {
		if s[i] != '2' && s[i] != '4' && s[i] != '5' {
			continue
		}
		if i > 0 && (isDigit(s[i-1]) || s[i-1] == '.') {
			continue
		}
		if c, ok := enhancedAt(s, i); ok {
			return c
		}
	}
	return enhanced{}
}

func enhancedAt(s string, i int) (enhanced, bool) {
	if i >= len(s) || s[i] != '2' && s[i] != '4' && s[i] != '5' {
		return enhanced{}, false
	}
	c := enhanced{class: int(s[i] - '0')}
	j := i + 1
	var ok bool
	if j >= len(s) || s[j] != '.' {
		return enhanced{}, false
	}
	if c.subject, j, ok = number(s, j+1); !ok || c.subject > 7 {
		return enhanced{}, false
	}
	if j >= len(s) || s[j] != '.' {
		return enhanced{}, false
	}
	if c.detail, j, ok = number(s, j+1); !ok {
		return enhanced{}, false
	}
	if j < len(s) && s[j] == '.' && j+1 < len(s) && isDigit(s[j+1]) {
		return enhanced{}, false
	}
	return c, true
}

// number reads 1 to 3 digits at s[i:], RFC 3463's "1*3digit".
func number(s string, i int) (n, end int, ok bool) {
	end = i
	for end < len(s) && end-i < 3 && isDigit(s[end]) {
		n = n*10 + int(s[end]-'0')
		end++
	}
	return n, end, end > i && !(end < len(s) && isDigit(s[end]))
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// pickEnhancedCode prefers the provider's field; the text's code replaces it when the field is
// missing or malformed, or says only X.0.0 ("no additional information": SendGrid sends 5.0.0
// next to a reason of "550 5.1.1 …").
func pickEnhancedCode(field, diag string) enhanced {
	f := findEnhanced(strings.TrimSpace(field))
	if f.valid() && (f.subject != 0 || f.detail != 0) {
		return f
	}
	if t := findEnhanced(diag); t.valid() {
		return t
	}
	return f
}

// validReply reports whether n is an SMTP reply code a bounce can carry: 2xx, 4xx or 5xx
// (Mailgun's 605 "not delivering to previously bounced address" is its own, not a server's).
func validReply(n int) bool {
	c := n / 100
	return n >= 200 && n <= 599 && (c == 2 || c == 4 || c == 5)
}

// ParseSMTPCode returns the reply code a diagnostic starts with, after a DSN type prefix
// ("smtp; 550 5.1.1 …", "smtp;554 …", "550-5.7.1 …"), or one quoted inside it when an enhanced
// code of the same class follows ("X-Postfix; host mx said: 550 5.1.1 …"); 0 when none.
func ParseSMTPCode(s string) int {
	t := strings.TrimSpace(s)
	if i := strings.IndexByte(t, ';'); i > 0 && i <= 16 && isDiagnosticType(t[:i]) {
		t = strings.TrimSpace(t[i+1:])
	}
	if n, ok := replyAt(t, 0); ok {
		return n
	}
	for i := 1; i+3 < len(t); i++ {
		if isDigit(t[i-1]) || isLetter(t[i-1]) || t[i-1] == '.' {
			continue
		}
		n, ok := replyAt(t, i)
		if !ok {
			continue
		}
		if c, ok := enhancedAt(t, i+4); ok && c.class == n/100 {
			return n
		}
	}
	return 0
}

// replyAt reads a reply code at t[i:]: three digits, then the end, a space or '-' (the
// continuation marker of a multi-line reply).
func replyAt(t string, i int) (int, bool) {
	if i+3 > len(t) || !isDigit(t[i]) || !isDigit(t[i+1]) || !isDigit(t[i+2]) {
		return 0, false
	}
	if i+3 < len(t) && t[i+3] != ' ' && t[i+3] != '-' {
		return 0, false
	}
	n := int(t[i]-'0')*100 + int(t[i+1]-'0')*10 + int(t[i+2]-'0')
	return n, validReply(n)
}

// isDiagnosticType reports whether p is a DSN diagnostic-type ("smtp", "X-Postfix", RFC 3464).
func isDiagnosticType(p string) bool {
	for i := 0; i < len(p); i++ {
		if !isLetter(p[i]) && !isDigit(p[i]) && p[i] != '-' {
			return false
		}
	}
	return p != "" && isLetter(p[0])
}

func isLetter(b byte) bool { return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }

func pickSMTPCode(field int, diag string) int {
	if validReply(field) {
		return field
	}
	return ParseSMTPCode(diag)
}

// category maps the enhanced code (RFC 3463, and the codes registered since in the IANA
// registry under RFC 5248) to a category, or "" when the code does not say. A class-4 code is
// mapped only where its subject names a lasting condition (a full mailbox, a size) or an
// authentication or spam verdict; any other 4.X.X falls through and ends as temporary_failure.
func (c enhanced) category(diag string) string {
	if c.class != 4 && c.class != 5 {
		return ""
	}
	permanent := c.class == 5
	switch c.subject {
	case 1: // addressing
		switch c.detail {
		case 0, 1, 3, 4, 6:
			// X.1.0 other address status, X.1.1 bad destination mailbox, X.1.3 bad mailbox
			// syntax, X.1.4 ambiguous, X.1.6 moved with no forwarding address.
			return UnknownUser
		case 2, 10:
			// X.1.2 bad destination system (domain); X.1.10 recipient domain has a null MX
			// (RFC 7505): it takes no mail.
			return DomainInvalid
		case 7, 8:
			// X.1.7, X.1.8: the sender's address or domain was refused.
			if permanent {
				return PolicyBlock
			}
		}
	case 2: // mailbox
		switch c.detail {
		case 1:
			// X.2.1 mailbox disabled. Gmail sends 4.2.1 for a recipient receiving too fast:
			// only the permanent form says the mailbox is gone.
			if permanent {
				return UnknownUser
			}
		case 2:
			return MailboxFull
		case 3:
			return TooLarge // message length exceeds administrative limit
		}
	case 3: // mail system
		if c.detail == 4 {
			return TooLarge // message too big for system
		}
	case 4: // network and routing
		switch c.detail {
		case 4:
			// X.4.4 unable to route: the domain has no usable MX/A records. Permanent, it is a
			// domain that takes no mail; transient, a DNS lookup that may succeed later.
			if permanent {
				return DomainInvalid
			}
		case 7:
			return TemporaryFailure // delivery time expired: transient failures until retries ran out
		}
	case 6: // message content or media
		return ContentRejected
	case 7: // security or policy
		return securityCategory(permanent, c.detail, diag)
	}
	return ""
}

// securityCategory maps X.7.X. The registry's authentication codes decide alone; X.7.0, X.7.1
// and the rest are refined by the server's words, because servers send 5.7.1 for a spam
// verdict, a block list, an SPF failure and a plain policy alike.
func securityCategory(permanent bool, detail int, diag string) string {
	switch detail {
	case 8, 9, 20, 21, 22, 23, 24, 25, 26, 27, 29:
		// X.7.8 credentials invalid, X.7.9 mechanism too weak (RFC 4954); X.7.20-X.7.26 no or
		// bad DKIM signature, SPF failed or errored, reverse DNS failed, several checks (DMARC)
		// failed (RFC 7372); X.7.27 the sender's domain has a null MX (RFC 7505); X.7.29 ARC
		// validation failed (RFC 8617).
		return AuthFailure
	case 16:
		return TooLarge // message too big for the specified priority (RFC 6710)
	case 17:
		if permanent {
			return UnknownUser // mailbox owner has changed (RFC 7293)
		}
	case 18:
		if permanent {
			return DomainInvalid // domain owner has changed (RFC 7293)
		}
	case 28:
		return SpamBlock // mail flood detected; Gmail's 4.7.28 "unusual rate of unsolicited mail"
	}
	if matches(authWords, diag) {
		return AuthFailure
	}
	if matches(spamWords, diag) {
		return SpamBlock
	}
	if permanent {
		return PolicyBlock // X.7.1 "delivery not authorized, message refused" and the rest
	}
	return ""
}

// smtpCategory maps the basic reply codes that name a cause (RFC 5321 §4.2.2, RFC 7504).
// 550 and 554 do not: servers use them for every kind of refusal.
func smtpCategory(n int) string {
	switch n {
	case 551, 553:
		return UnknownUser // user not local; mailbox name not allowed
	case 552:
		return MailboxFull // exceeded storage allocation (a size limit says so in its text)
	case 521, 556:
		return DomainInvalid // host / domain does not accept mail (RFC 7504)
	}
	return ""
}
