package provider_test

import (
	"testing"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
)

func TestRecipientIsWhomTheEventIsAbout(t *testing.T) {
	two := []string{"first@x.com", "Second <second@y.com>"}
	for name, tt := range map[string]struct {
		kind domain.Kind
		to   []string
		diag string
		want string
	}{
		"one, as written":             {domain.KindStatus, []string{"Jane <jane@x.com>"}, "", "Jane <jane@x.com>"},
		"one, written twice":          {domain.KindStatus, []string{"jane@x.com", "JANE@x.com"}, "", "jane@x.com"},
		"none":                        {domain.KindStatus, nil, "550 5.1.1 <a@b.c>", ""},
		"several, the DSN names one":  {domain.KindStatus, two, "smtp; 550 5.1.1 <second@y.com>: user unknown", "second@y.com"},
		"several, the DSN names none": {domain.KindStatus, two, "550 5.1.1 user unknown", ""},
		"several, no text":            {domain.KindUnsubscribed, two, "", ""},
		"a header's list":             {domain.KindStatus, []string{"first@x.com, second@y.com"}, "550 <first@x.com> unknown", "first@x.com"},
		"inbound: the first mailbox":  {domain.KindInbound, []string{"Support <support@app.com>", "sales@app.com"}, "", "support@app.com"},
	} {
		if got := provider.Recipient(tt.kind, tt.to, tt.diag); got != tt.want {
			t.Errorf("%s: Recipient = %q, want %q", name, got, tt.want)
		}
	}
}
