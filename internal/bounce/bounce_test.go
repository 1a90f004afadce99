package bounce

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mailhook/mailhook/internal/domain"
)

const (
	hard = domain.BounceHard
	soft = domain.BounceSoft
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name     string
		in       Input
		smtp     int
		code     string
		category string
		typ      string
		rule     Rule
	}{
		// RFC 3463 addressing status, the text ignored.
		{"X.1.1 bad destination mailbox", Input{Diagnostic: "550 5.1.1 <jane@example.com>: Recipient address rejected: User unknown in virtual mailbox table"},
			550, "5.1.1", UnknownUser, hard, RuleEnhancedCode},
		{"X.1.0 other address status (Exchange's #)", Input{Diagnostic: "550 #5.1.0 Address rejected."}, 550, "5.1.0", UnknownUser, hard, RuleEnhancedCode},
		{"X.1.2 bad destination system", Input{Diagnostic: "550 5.1.2 Host unknown (Name server: example.invalid: host not found)"},
			550, "5.1.2", DomainInvalid, hard, RuleEnhancedCode},
		{"X.1.3 bad mailbox syntax", Input{Diagnostic: "553 5.1.3 <foo@@nil>... Invalid route address"}, 553, "5.1.3", UnknownUser, hard, RuleEnhancedCode},
		{"X.1.6 moved, no forwarding address", Input{Diagnostic: "550 5.1.6 Recipient no longer on server"}, 550, "5.1.6", UnknownUser, hard, RuleEnhancedCode},
		{"X.1.10 null MX (RFC 7505)", Input{Diagnostic: "556 5.1.10 Recipient address has null MX"}, 556, "5.1.10", DomainInvalid, hard, RuleEnhancedCode},
		{"X.1.8 sender's system refused", Input{Diagnostic: "553 5.1.8 <a@b.invalid>: Sender address rejected: Domain not found"},
			553, "5.1.8", PolicyBlock, soft, RuleEnhancedCode},
		// Mailbox status.
		{"5.2.1 disabled (Gmail)", Input{Diagnostic: "550-5.2.1 The email account that you tried to reach is disabled."}, 550, "5.2.1", UnknownUser, hard, RuleEnhancedCode},
		{"4.2.1 rate (Gmail) is not a dead mailbox", Input{Diagnostic: "450-4.2.1 The user you are trying to contact is receiving mail at a rate that prevents additional messages from being delivered."},
			450, "4.2.1", TemporaryFailure, soft, RuleTransient},
		{"4.2.2 over quota (Gmail)", Input{Diagnostic: "452-4.2.2 The email account that you tried to reach is over quota."}, 452, "4.2.2", MailboxFull, soft, RuleEnhancedCode},
		{"5.2.2 is a persistent transient failure: soft", Input{Diagnostic: "552-5.2.2 The email account that you tried to reach is over quota.", ProviderBounceType: hard},
			552, "5.2.2", MailboxFull, soft, RuleEnhancedCode},
		{"5.2.3 message length exceeds limit", Input{Diagnostic: "552-5.2.3 Your message exceeded Google's message size limits."}, 552, "5.2.3", TooLarge, soft, RuleEnhancedCode},
		{"5.3.4 message too big for system", Input{Diagnostic: "552 5.3.4 Message size exceeds fixed limit"}, 552, "5.3.4", TooLarge, soft, RuleEnhancedCode},
		// Network and routing.
		{"5.4.4 unable to route", Input{Diagnostic: "550 5.4.4 Unable to route: no MX records"}, 550, "5.4.4", DomainInvalid, hard, RuleEnhancedCode},
		{"4.4.4 is a DNS lookup that may work later", Input{Diagnostic: "451 4.4.4 Unable to route"}, 451, "4.4.4", TemporaryFailure, soft, RuleTransient},
		{"5.4.7 delivery time expired", Input{Diagnostic: "550 5.4.7 Delivery time expired", ProviderBounceType: hard}, 550, "5.4.7", TemporaryFailure, soft, RuleEnhancedCode},
		{"4.4.2 connection timed out (Postmark Transient)", Input{Diagnostic: "smtp;421 4.4.2 Connection timed out"}, 421, "4.4.2", TemporaryFailure, soft, RuleDiagnostic},
		// Content.
		{"5.6.1 media not supported", Input{Diagnostic: "554 5.6.1 Media type not supported"}, 554, "5.6.1", ContentRejected, soft, RuleEnhancedCode},
		// Security or policy: the registry's authentication codes, then the words.
		{"5.7.1 plain policy", Input{Diagnostic: "smtp;554 5.7.1 Service unavailable; client host blocked", ProviderBounceType: soft},
			554, "5.7.1", PolicyBlock, soft, RuleEnhancedCode},
		{"5.7.1 relaying denied, no provider type", Input{Diagnostic: "554 5.7.1 <x@example.com>: Relay access denied"}, 554, "5.7.1", PolicyBlock, soft, RuleEnhancedCode},
		{"5.7.1 hard from the provider stays hard", Input{Diagnostic: "550 5.7.1 Delivery not authorized, message refused", ProviderBounceType: hard},
			550, "5.7.1", PolicyBlock, hard, RuleEnhancedCode},
		{"5.7.1 spam verdict (Gmail)", Input{Diagnostic: "550-5.7.1 [192.0.2.1] Our system has detected that this message is likely unsolicited mail. To reduce the amount of spam sent to Gmail, this message has been blocked."},
			550, "5.7.1", SpamBlock, soft, RuleEnhancedCode},
		{"5.7.1 block list (Outlook)", Input{Diagnostic: "550 5.7.1 Unfortunately, messages from [192.0.2.1] weren't sent. Please contact your Internet service provider since part of their network is on our block list (S3150)."},
			550, "5.7.1", SpamBlock, soft, RuleEnhancedCode},
		{"5.7.1 Spamhaus", Input{Diagnostic: "554 5.7.1 Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org"}, 554, "5.7.1", SpamBlock, soft, RuleEnhancedCode},
		{"5.7.1 SPF words", Input{Diagnostic: "550 5.7.1 SPF check failed for sender example.com"}, 550, "5.7.1", AuthFailure, soft, RuleEnhancedCode},
		{"5.7.26 DMARC (Gmail), though it says spam", Input{Diagnostic: "550-5.7.26 This mail has been blocked because the sender is unauthenticated. Gmail requires all senders to authenticate with either SPF or DKIM. To best protect our users from spam, the message has been blocked."},
			550, "5.7.26", AuthFailure, soft, RuleEnhancedCode},
		{"5.7.25 reverse DNS (Gmail)", Input{Diagnostic: "550-5.7.25 The IP address sending this message does not have a PTR record setup"}, 550, "5.7.25", AuthFailure, soft, RuleEnhancedCode},
		{"5.7.23 SPF validation failed", Input{EnhancedCode: "5.7.23", Diagnostic: "550 message rejected"}, 550, "5.7.23", AuthFailure, soft, RuleEnhancedCode},
		{"5.7.27 sender null MX", Input{Diagnostic: "550 5.7.27 Sender address has null MX"}, 550, "5.7.27", AuthFailure, soft, RuleEnhancedCode},
		{"4.7.0 spam rate limit (Gmail)", Input{Diagnostic: "421-4.7.0 [192.0.2.1] Our system has detected an unusual rate of unsolicited mail originating from your IP address. To protect our users from spam, mail sent from your IP address has been temporarily rate limited."},
			421, "4.7.0", SpamBlock, soft, RuleEnhancedCode},
		{"4.7.28 mail flood", Input{Diagnostic: "421-4.7.28 Gmail has detected an unusual rate of mail originating from your IP address."}, 421, "4.7.28", SpamBlock, soft, RuleEnhancedCode},
		{"4.7.1 greylisting", Input{Diagnostic: "451 4.7.1 Greylisting in action, please come back later"}, 451, "4.7.1", TemporaryFailure, soft, RuleDiagnostic},
		{"4.7.0 try again (SendGrid Technical)", Input{EnhancedCode: "4.7.0", Diagnostic: "421 4.7.0 Try again later, closing connection", ProviderReasons: []string{"Technical"}},
			421, "4.7.0", TemporaryFailure, soft, RuleDiagnostic},
		{"4.7.0 Yahoo TSS04 complaints", Input{Diagnostic: "421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected volume or user complaints"},
			421, "4.7.0", SpamBlock, soft, RuleEnhancedCode},

		// No decisive enhanced code: the text.
		{"5.5.0 mailbox unavailable (Outlook)", Input{Diagnostic: "550 5.5.0 Requested action not taken: mailbox unavailable (S2017062302)."}, 550, "5.5.0", UnknownUser, hard, RuleDiagnostic},
		{"Yahoo 554 without an enhanced code", Input{Diagnostic: "554 delivery error: dd This user doesn't have a yahoo.com account (someone@yahoo.com) [0] - mta1234.mail.gq1.yahoo.com"},
			554, "", UnknownUser, hard, RuleDiagnostic},
		{"Yahoo 552 mailbox not found: the text beats 552", Input{Diagnostic: "552 1 Requested mail action aborted, mailbox not found"}, 552, "", UnknownUser, hard, RuleDiagnostic},
		{"552 size in words", Input{Diagnostic: "552 Message size exceeds fixed maximum message size"}, 552, "", TooLarge, soft, RuleDiagnostic},
		{"SendGrid 5.0.0 with a reason", Input{EnhancedCode: "5.0.0", Diagnostic: "500 unknown recipient", ProviderReasons: []string{"blocked"}, ProviderBounceType: soft},
			500, "5.0.0", UnknownUser, hard, RuleDiagnostic},
		{"X.0.0 field gives way to the text's code", Input{EnhancedCode: "5.0.0", Diagnostic: "550 5.1.1 user unknown"}, 550, "5.1.1", UnknownUser, hard, RuleEnhancedCode},
		{"Mailgun: code field, code-less text", Input{SMTPCode: 550, Diagnostic: "5.1.1 The email account that you tried to reach does not exist. Please try\n5.1.1 double-checking the recipient's email address for typos"},
			550, "5.1.1", UnknownUser, hard, RuleEnhancedCode},
		{"Mailgun 498 no MX", Input{SMTPCode: 498, Diagnostic: "No MX for nomx.example.com"}, 498, "", DomainInvalid, soft, RuleDiagnostic},
		{"Postfix DSN with the reply quoted", Input{Diagnostic: "X-Postfix; host mx.example.com[192.0.2.1] said: 550 5.1.1 <x@example.com>: Recipient address rejected (in reply to RCPT TO command)"},
			550, "5.1.1", UnknownUser, hard, RuleEnhancedCode},
		{"a named domain that does not exist", Input{Diagnostic: "550 The domain example.invalid does not exist"}, 550, "", DomainInvalid, hard, RuleDiagnostic},
		{"virus", Input{Diagnostic: "Virus detected", ProviderBounceType: soft}, 0, "", ContentRejected, soft, RuleDiagnostic},

		// The basic code.
		{"551 user not local", Input{Diagnostic: "551 User not local; please try <forward@example.org>"}, 551, "", UnknownUser, hard, RuleSMTPCode},
		{"552 storage", Input{Diagnostic: "552 Requested mail action aborted: exceeded storage allocation"}, 552, "", MailboxFull, soft, RuleDiagnostic},
		{"552 alone", Input{SMTPCode: 552}, 552, "", MailboxFull, soft, RuleSMTPCode},
		{"521 host does not accept mail", Input{Diagnostic: "521 mx.example.com does not accept mail"}, 521, "", DomainInvalid, hard, RuleSMTPCode},

		// The provider's classification.
		{"SES MailboxFull, code-less text", Input{ProviderReasons: []string{"MailboxFull", "Transient"}, ProviderBounceType: soft}, 0, "", MailboxFull, soft, RuleProvider},
		{"Postmark DnsError", Input{Diagnostic: "DNS lookup failed", ProviderReasons: []string{"DnsError"}, ProviderBounceType: soft}, 0, "", TemporaryFailure, soft, RuleProvider},
		{"Mailgun espblock", Input{SMTPCode: 550, Diagnostic: "rejected", ProviderReasons: []string{"espblock", "permanent"}, ProviderBounceType: soft},
			550, "", PolicyBlock, soft, RuleProvider},
		{"an unmapped reason is no reason", Input{ProviderReasons: []string{"General", "Permanent"}, ProviderBounceType: hard}, 0, "", Undetermined, hard, RuleNone},

		// Nothing specific.
		{"a 4xx says temporary", Input{Diagnostic: "450 Requested mail action not taken"}, 450, "", TemporaryFailure, soft, RuleTransient},
		{"a provider's hard with a 4xx is soft", Input{Diagnostic: "421 Service not available", ProviderBounceType: hard, ProviderReasons: []string{"old"}},
			421, "", TemporaryFailure, soft, RuleProvider},
		{"a bare 5xx is hard", Input{Diagnostic: "550 Requested action not taken"}, 550, "", Undetermined, hard, RuleNone},
		{"a bare 5xx keeps the provider's soft", Input{Diagnostic: "550 Requested action not taken", ProviderBounceType: soft}, 550, "", Undetermined, soft, RuleNone},
		{"no code keeps the provider's type", Input{Diagnostic: "Unparseable bounce", ProviderBounceType: soft}, 0, "", Undetermined, soft, RuleNone},
		{"no code, no type", Input{Diagnostic: "Unparseable bounce"}, 0, "", Undetermined, "", RuleNone},
		{"a version number is no code", Input{Diagnostic: "Exim 4.94.2 rejected the message"}, 0, "", Undetermined, "", RuleNone},

		// Dropped by the provider: its own text proves nothing.
		{"dropped over quota", Input{Diagnostic: "Recipient List over Package Quota", EnhancedCode: "5.0.0", Dropped: true}, 0, "", Undetermined, "", RuleNone},
		{"dropped, SES Reject", Input{Diagnostic: "Bad content", ProviderReasons: []string{"Bad content"}, Dropped: true}, 0, "", ContentRejected, "", RuleProvider},

		// The provider's fixed sentence is advice, not a reply: no keyword read from it.
		{"explanation alone", Input{Explanation: "Sending to addresses that produce hard bounces can have a negative impact on your reputation as a sender.",
			ProviderReasons: []string{"General", "Permanent"}, ProviderBounceType: hard}, 0, "", Undetermined, hard, RuleNone},
		{"explanation under a reply", Input{Diagnostic: "smtp; 550 5.1.1 user unknown", Explanation: "negative impact on your reputation"},
			550, "5.1.1", UnknownUser, hard, RuleEnhancedCode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Classify(tt.in)
			if r.Bounce.SMTPCode != tt.smtp || r.Bounce.EnhancedCode != tt.code || r.Bounce.Category != tt.category || r.BounceType != tt.typ || r.Rule != tt.rule {
				t.Errorf("Classify = smtp %d, code %q, %s, type %q by %s\n          want smtp %d, code %q, %s, type %q by %s",
					r.Bounce.SMTPCode, r.Bounce.EnhancedCode, r.Bounce.Category, r.BounceType, r.Rule,
					tt.smtp, tt.code, tt.category, tt.typ, tt.rule)
			}
		})
	}
}

// Every category in the documented list can come out, and nothing else does.
func TestCategoriesAreReachable(t *testing.T) {
	inputs := map[string]Input{
		UnknownUser:      {Diagnostic: "550 5.1.1 x"},
		MailboxFull:      {Diagnostic: "552 5.2.2 x"},
		DomainInvalid:    {Diagnostic: "550 5.1.2 x"},
		PolicyBlock:      {Diagnostic: "550 5.7.1 x"},
		SpamBlock:        {Diagnostic: "550 5.7.1 spam"},
		ContentRejected:  {Diagnostic: "554 5.6.0 x"},
		AuthFailure:      {Diagnostic: "550 5.7.26 x"},
		TooLarge:         {Diagnostic: "552 5.3.4 x"},
		TemporaryFailure: {Diagnostic: "421 x"},
		Undetermined:     {Diagnostic: "550 x"},
	}
	if len(inputs) != len(Categories) {
		t.Fatalf("%d categories tested, %d defined", len(inputs), len(Categories))
	}
	for _, c := range Categories {
		if got := Classify(inputs[c]).Bounce.Category; got != c {
			t.Errorf("%v: category %s, want %s", inputs[c], got, c)
		}
	}
}

func TestParseEnhancedCode(t *testing.T) {
	for in, want := range map[string]string{
		"5.1.1":                           "5.1.1",
		" 4.2.2 ":                         "4.2.2",
		"550 5.1.1 <x@example.com>":       "5.1.1",
		"550-5.7.26 This mail":            "5.7.26",
		"550 #5.1.0 Address rejected":     "5.1.0",
		"(#5.1.1)":                        "5.1.1",
		"status 5.1.1.":                   "5.1.1",
		"5.1.01":                          "5.1.1",
		"5.1.1000":                        "",
		"5.8.1":                           "", // no subject 8 in RFC 3463
		"3.1.1":                           "",
		"192.0.2.1 said 550 5.7.1 denied": "5.7.1",
		"[192.168.5.4]":                   "",
		"Exim 4.94.2":                     "",
		"5.1.1.2":                         "",
		"55.1.1":                          "",
		"5.1":                             "",
		"":                                "",
	} {
		if got := findEnhanced(in).String(); got != want {
			t.Errorf("findEnhanced(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseSMTPCode(t *testing.T) {
	for in, want := range map[string]int{
		"550 5.1.1 user unknown":          550,
		"smtp; 550 5.1.1 user unknown":    550,
		"smtp;554 5.7.1 blocked":          554,
		"SMTP; 452-4.2.2 over quota":      452,
		"421":                             421,
		"550":                             550,
		"5.1.1 The email account":         0,
		"605 not a reply code":            0,
		"1234 no":                         0,
		"550x":                            0,
		"host said: 550 5.1.1 <x>":        550,
		"host said: 550 4.1.1 mismatched": 0,
		"quoted 550 without a code":       0,
		"Mail 250 OK":                     0,
		"":                                0,
		";":                               0,
	} {
		if got := ParseSMTPCode(in); got != want {
			t.Errorf("ParseSMTPCode(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestCleanDiagnostic(t *testing.T) {
	for in, want := range map[string]string{
		"  550 5.1.1\r\n  user\tunknown \n": "550 5.1.1 user unknown",
		"nul\x00byte":                       "nulbyte",
		"bad \xff\xfe utf-8":                "bad utf-8",
		"bell\a and DEL\x7f":                "bell and DEL",
		"ünïcödé ✓":                         "ünïcödé ✓",
		"":                                  "",
	} {
		if got := CleanDiagnostic(in); got != want {
			t.Errorf("CleanDiagnostic(%q) = %q, want %q", in, got, want)
		}
	}
	// Cut on a character boundary, never over the limit, never mid-rune.
	for _, s := range []string{strings.Repeat("a", 5000), strings.Repeat("é", 5000), "x" + strings.Repeat("✓", 5000), strings.Repeat("a ", 5000)} {
		got := CleanDiagnostic(s)
		if len(got) > domain.MaxDiagnosticBytes || len(got) < domain.MaxDiagnosticBytes-3 || !utf8.ValidString(got) || strings.HasSuffix(got, " ") {
			t.Errorf("CleanDiagnostic of %d bytes: %d bytes, valid %v", len(s), len(got), utf8.ValidString(got))
		}
	}
}

func TestStreamName(t *testing.T) {
	for in, want := range map[string]string{
		" outbound ":             "outbound",
		"broadcast-2026":         "broadcast-2026",
		"nul\x00":                "",
		"line\nbreak":            "",
		strings.Repeat("s", 256): "",
		strings.Repeat("s", 255): strings.Repeat("s", 255),
		"":                       "",
		"\xff":                   "",
		"cat facts":              "cat facts",
	} {
		if got := StreamName(in); got != want {
			t.Errorf("StreamName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestApply(t *testing.T) {
	in := Input{Diagnostic: "550 5.1.1 user unknown"}
	for _, tt := range []struct {
		name       string
		ev         domain.Event
		in         Input
		bounce     bool
		bounceType string
	}{
		{"bounced: details and the derived type", domain.Event{Status: domain.StatusBounced, BounceType: soft}, in, true, hard},
		{"failed: details, no type", domain.Event{Status: domain.StatusFailed}, in, true, ""},
		{"deferred: untouched", domain.Event{Status: domain.StatusDeferred}, in, false, ""},
		{"complained: untouched", domain.Event{Status: domain.StatusComplained}, in, false, ""},
		{"nothing said: no details, type kept", domain.Event{Status: domain.StatusBounced, BounceType: hard}, Input{ProviderReasons: []string{" "}}, false, hard},
		{"a reason that names nothing says nothing", domain.Event{Status: domain.StatusBounced, BounceType: hard}, Input{ProviderReasons: []string{"General", "Permanent"}}, false, hard},
		{"a reason that names a category", domain.Event{Status: domain.StatusBounced, BounceType: soft}, Input{ProviderReasons: []string{"MailboxFull"}}, true, soft},
		{"the event's type is the provider's", domain.Event{Status: domain.StatusBounced, BounceType: hard}, Input{Diagnostic: "no code here"}, true, hard},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev := tt.ev
			Apply(&ev, tt.in)
			if (ev.Bounce != nil) != tt.bounce || ev.BounceType != tt.bounceType {
				t.Errorf("Apply: bounce %+v, type %q; want bounce %v, type %q", ev.Bounce, ev.BounceType, tt.bounce, tt.bounceType)
			}
		})
	}
}

// Every documented provider reason maps to a category, and the keys are what reasonKey makes.
func TestProviderReasons(t *testing.T) {
	for k, c := range providerReasons {
		if reasonKey(k) != k {
			t.Errorf("key %q is not normalized", k)
		}
		if !slices.Contains(Categories, c) || c == Undetermined {
			t.Errorf("%q maps to %q", k, c)
		}
	}
	for in, want := range map[string]string{"Frequency/Volume": TemporaryFailure, "Invalid Address": UnknownUser, "DMARCPolicy": AuthFailure, "suppress-bounce": ""} {
		got, rule := providerCategory([]string{in})
		if rule != RuleProvider {
			got = ""
		}
		if got != want {
			t.Errorf("providerCategory(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add(550, "5.1.1", "smtp; 550 5.1.1 user unknown", "hard", "General", false)
	f.Add(0, "", "421-4.7.0 try again \x00\xff", "", "", false)
	f.Add(605, "5.0.0", "Not delivering to previously bounced address", "", "suppress-bounce", true)
	f.Add(452, "4.2.2", strings.Repeat("é", 800), "soft", "MailboxFull", false)
	f.Fuzz(func(t *testing.T, smtp int, code, diag, typ, reason string, dropped bool) {
		r := Classify(Input{SMTPCode: smtp, EnhancedCode: code, Diagnostic: diag, ProviderBounceType: typ, ProviderReasons: []string{reason}, Dropped: dropped})
		b := r.Bounce
		if len(b.Diagnostic) > domain.MaxDiagnosticBytes || !utf8.ValidString(b.Diagnostic) || strings.ContainsRune(b.Diagnostic, 0) {
			t.Fatalf("diagnostic %q not storable", b.Diagnostic)
		}
		if !slices.Contains(Categories, b.Category) {
			t.Fatalf("category %q", b.Category)
		}
		if r.BounceType != "" && r.BounceType != hard && r.BounceType != soft {
			t.Fatalf("bounce type %q", r.BounceType)
		}
		if b.SMTPCode != 0 && !validReply(b.SMTPCode) {
			t.Fatalf("smtp code %d", b.SMTPCode)
		}
		if b.EnhancedCode != "" && findEnhanced(b.EnhancedCode).String() != b.EnhancedCode {
			t.Fatalf("enhanced code %q", b.EnhancedCode)
		}
		if dropped && (b.SMTPCode != 0 || b.EnhancedCode != "") {
			t.Fatalf("codes read from a dropped message's text")
		}
		// A stored Bounce classifies the same way again.
		again := Classify(Input{SMTPCode: b.SMTPCode, EnhancedCode: b.EnhancedCode, Diagnostic: b.Diagnostic, ProviderBounceType: typ, ProviderReasons: []string{reason}, Dropped: dropped})
		if again.Bounce != b || again.BounceType != r.BounceType {
			t.Fatalf("not stable: %+v then %+v", r, again)
		}
	})
}
