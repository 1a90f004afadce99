package standardwebhooks

import "testing"

// Resend relays SES's diagnosticCode: of a message to several, the bounce is the recipient it
// names, never simply the first of "to" (issue 25).
func TestResendBounceOfAMessageToSeveralNamesTheOneItIsAbout(t *testing.T) {
	for name, tt := range map[string]struct{ body, want string }{
		"the DSN names the second": {`{"type":"email.bounced","created_at":"2024-11-22T23:50:00Z","data":{"email_id":"e1",
			"to":["first@example.com","second@example.com"],
			"bounce":{"type":"Permanent","subType":"General","diagnosticCode":["smtp; 550 5.1.1 <second@example.com>... User unknown"]}}}`,
			"second@example.com"},
		"the DSN names no one": {`{"type":"email.bounced","created_at":"2024-11-22T23:50:00Z","data":{"email_id":"e2",
			"to":["first@example.com","second@example.com"],
			"bounce":{"type":"Permanent","subType":"General","diagnosticCode":["smtp; 550 5.1.1 User unknown"]}}}`, ""},
		"a complaint of a message to several": {`{"type":"email.complained","created_at":"2024-11-22T23:50:00Z","data":{"email_id":"e3",
			"to":["first@example.com","second@example.com"]}}`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			ev, err := parseResend([]byte(tt.body))
			if err != nil {
				t.Fatalf("parseResend: %v", err)
			}
			if ev.Recipient != tt.want {
				t.Fatalf("Recipient = %q, want %q", ev.Recipient, tt.want)
			}
		})
	}
}
