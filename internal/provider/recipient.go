package provider

import (
	"slices"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/mailaddr"
)

// Recipient is whom an event of kind is about, from its message's recipient list (to, as the
// provider wrote it: each entry an address or a header's list of them) and, for a bounce or a
// failure, the diagnostic text the remote server or the provider gave:
//
//   - a message to one address: that address, as written;
//   - an inbound email to several of your addresses: the first (the mailbox it reached);
//   - any other event of a message to several: the one the diagnostic names
//     ("550 5.1.1 <b@y.com>: …"), as a suppression key, or "" when it names none or several:
//     the event does not say whose it is, so it suppresses no one rather than the first of the
//     list (docs/PROVIDERS.md "Recipients and suppression keys").
//
// Providers that send one event per recipient (SendGrid, Mailgun, Postmark, and SES through
// bouncedRecipients) name it themselves and do not need this.
func Recipient(kind domain.Kind, to []string, diagnostic string) string {
	var keys []string
	firstIsOne := false // to[0] is one address, not a header's list
	for i, t := range to {
		list := mailaddr.List(t)
		firstIsOne = firstIsOne || i == 0 && len(list) == 1
		for _, k := range list {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	switch {
	case len(keys) == 0:
		return ""
	case len(keys) == 1 && firstIsOne:
		return to[0]
	case len(keys) == 1:
		return keys[0]
	case kind == domain.KindInbound:
		return keys[0]
	}
	named, _ := mailaddr.Named(diagnostic, keys)
	return named
}
