package postscale

import (
	"net/http"
	"testing"

	"github.com/mailhook/mailhook/internal/provider"
)

// A bounce of a message to several names the recipient its diagnostic is about, never simply
// the first of "to" (issue 25: a 550 for the second suppressed the first).
func TestBounceOfAMessageToSeveralNamesTheOneItIsAbout(t *testing.T) {
	a := newAdapter(t, testSecret)
	for name, tt := range map[string]struct{ body, want string }{
		"the DSN names the second": {`{"id":"evt_m1","type":"email.bounced","data":{"email_id":"m1",
			"to":["first@example.com",{"email":"Second@Example.com"}],"bounce_type":"hard",
			"diagnostic":"550 5.1.1 <second@example.com>: Recipient address rejected: User unknown"}}`, "second@example.com"},
		"the DSN names no one": {`{"id":"evt_m2","type":"email.bounced","data":{"email_id":"m2",
			"to":["first@example.com","second@example.com"],"bounce_type":"hard","diagnostic":"550 5.1.1 user unknown"}}`, ""},
		"one recipient, as written": {`{"id":"evt_m3","type":"email.bounced","data":{"email_id":"m3",
			"to":"Jane Doe <jane@example.com>","bounce_type":"hard","diagnostic":"550 5.1.1 user unknown"}}`, "Jane Doe <jane@example.com>"},
	} {
		t.Run(name, func(t *testing.T) {
			events, err := a.Parse(provider.Request{Header: http.Header{}, Body: []byte(tt.body)})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := events[0].Recipient; got != tt.want {
				t.Fatalf("Recipient = %q, want %q", got, tt.want)
			}
		})
	}
}
