// Package suppression holds the rules of which events suppress an address, why and in which
// scope, and when soft bounces escalate. It is pure: the store applies these rules inside its
// transactions, notifications name what they decided, and tests call them directly.
package suppression

import (
	"slices"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/mailaddr"
)

// GlobalScope is domain.GlobalScope, named where the scope rules are.
const GlobalScope = domain.GlobalScope

// KnownReason reports whether r is one of domain.SuppressionReasons.
func KnownReason(r string) bool { return slices.Contains(domain.SuppressionReasons, r) }

// Of says whether ev suppresses its recipient, why and in which scope: a hard bounce always
// globally, a complaint or an unsubscribe in the scope its stream maps to (scopes: config
// suppression.scopes), else globally. A recipient who opts out of one stream opted out of that
// kind of mail only; a hard bounce says the mailbox is dead for every kind. The address is the
// event's recipient, or else recipient (the message's, after the event), as a suppression key
// (mailaddr.Key); an event with neither suppresses nothing. Corrections never suppress: they are
// an operator's word about one message, not a signal from the recipient's mailbox.
func Of(ev domain.Event, recipient string, scopes map[string]string) (address, reason, scope string, ok bool) {
	scope = GlobalScope
	switch {
	case ev.Kind == domain.KindStatus && ev.Status == domain.StatusBounced && ev.BounceType == domain.BounceHard:
		reason = domain.ReasonHardBounce
	case ev.Kind == domain.KindStatus && ev.Status == domain.StatusComplained:
		reason = domain.ReasonComplaint
		scope = scopeOfStream(ev.Stream, scopes)
	case ev.Kind == domain.KindUnsubscribed:
		reason = domain.ReasonUnsubscribe
		scope = scopeOfStream(ev.Stream, scopes)
	default:
		return "", "", "", false
	}
	address = addressOf(ev, recipient)
	if address == "" {
		return "", "", "", false
	}
	return address, reason, scope, true
}

func scopeOfStream(stream string, scopes map[string]string) string {
	if sc, ok := scopes[stream]; ok && stream != "" && sc != "" {
		return sc
	}
	return GlobalScope
}

// addressOf is the suppression key an event counts for: its own recipient's, or else the
// message's.
func addressOf(ev domain.Event, recipient string) string {
	if address := mailaddr.Key(ev.Recipient); address != "" {
		return address
	}
	return mailaddr.Key(recipient)
}

// SoftBounce is the soft-bounce escalation (config suppression.soft_bounce): an address with
// Count soft bounces within Within, in provider time, is suppressed globally. Count 0 turns it
// off: soft bounces are then not even recorded.
type SoftBounce struct {
	Count  int
	Within time.Duration
}

// On reports whether soft bounces are counted at all.
func (p SoftBounce) On() bool { return p.Count > 0 && p.Within > 0 }

// Reached reports whether n soft bounces within the window suppress the address.
func (p SoftBounce) Reached(n int) bool { return p.On() && n >= p.Count }

// SoftBounceOf says whether ev is a soft bounce that counts towards its recipient's threshold,
// and the address it counts for: the event's recipient, or else recipient (the message's),
// normalized as a suppressions key.
func SoftBounceOf(ev domain.Event, recipient string) (address string, ok bool) {
	if ev.Kind != domain.KindStatus || ev.Status != domain.StatusBounced || ev.BounceType != domain.BounceSoft {
		return "", false
	}
	address = addressOf(ev, recipient)
	return address, address != ""
}

// Added is the suppression an event added when its recorded outcome says it suppressed its
// recipient: Of's, or else, for a soft bounce, the soft-bounce threshold's (which is global). It
// is how a notification names what the store did without storing it twice: a soft bounce
// suppresses only by reaching the threshold, and the threshold's count is gone by the time a
// notification is built. ok is false for an event that cannot have suppressed anything.
func Added(ev domain.Event, recipient string, scopes map[string]string) (address, reason, scope string, ok bool) {
	if address, reason, scope, ok = Of(ev, recipient, scopes); ok {
		return address, reason, scope, true
	}
	if address, ok = SoftBounceOf(ev, recipient); ok {
		return address, domain.ReasonSoftBounceThreshold, GlobalScope, true
	}
	return "", "", "", false
}
