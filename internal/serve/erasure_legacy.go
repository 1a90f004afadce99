package serve

import (
	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/provider/postmark"
	"github.com/mailhook/mailhook/internal/provider/ses"
)

// PriorKeys are the providers whose keys versions before 2026-12-02 built with the recipient's
// address, with their rules for the current key (each provider's id_legacy.go), for an erasure
// to re-key such rows (erasure.PriorKeys). Remove it with internal/erasure/keys_legacy.go.
var PriorKeys = erasure.PriorKeys{
	EventIDs:   map[string]func(string) (string, bool){postmark.Name: postmark.CurrentEventID, ses.Name: ses.CurrentEventID},
	MessageIDs: map[string]func(string) (string, bool){ses.Name: ses.CurrentMessageID},
}
