// Package apply is what applying an event to its message decides, put together from the pure
// rules (internal/precedence, internal/suppression) and the config that shapes them
// (suppression.scopes, suppression.soft_bounce, the routing an event was accepted with): the
// domain.Rules the store runs inside the transaction that holds the message's row.
package apply

import (
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/precedence"
	"github.com/mailhook/mailhook/internal/suppression"
)

// Rules are the rules of one deployment, and of one event's routing.
type Rules struct {
	// Scopes maps a stream to the scope its complaints and unsubscribes suppress in (config
	// suppression.scopes); nil: every suppression is global.
	Scopes map[string]string
	// Escalation is the soft-bounce escalation (config suppression.soft_bounce); zero: off.
	Escalation suppression.SoftBounce
	// Routing is where the event's outcome is notified: Notifies reads it.
	Routing domain.Routing
}

var _ domain.Rules = Rules{}

// Apply is precedence's.
func (Rules) Apply(cur domain.MessageState, ev domain.Event, now time.Time) (domain.MessageState, domain.ApplyResult, bool, error) {
	return precedence.ApplyToMessage(cur, ev, now)
}

// KeptBounce is precedence's.
func (Rules) KeptBounce(ev domain.Event) domain.Bounce { return precedence.BounceKept(ev) }

// Suppresses is suppression's, in the configured scopes.
func (r Rules) Suppresses(ev domain.Event, recipient string) (address, reason, scope string, ok bool) {
	return suppression.Of(ev, recipient, r.Scopes)
}

// SoftBounce is the escalation's, when it is on.
func (r Rules) SoftBounce(ev domain.Event, recipient string) (string, time.Duration, bool) {
	if !r.Escalation.On() {
		return "", 0, false
	}
	address, ok := suppression.SoftBounceOf(ev, recipient)
	return address, r.Escalation.Within, ok
}

// SoftBouncesSuppress is the escalation's threshold.
func (r Rules) SoftBouncesSuppress(n int) bool { return r.Escalation.Reached(n) }

// Notifies reports whether the outcome is notified to any sink of the routing.
func (r Rules) Notifies(ev domain.Event, res domain.ApplyResult, applied bool) bool {
	return len(domain.Notifications(r.Routing, ev.Kind, res.Outcome, applied && res.Suppressed)) > 0
}
