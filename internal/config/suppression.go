package config

import (
	"fmt"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
)

// Suppression configures suppressions beyond the defaults (a hard bounce, a complaint and an
// unsubscribe suppress the address for every kind of mail).
type Suppression struct {
	// SoftBounce, when Count > 0, suppresses an address (reason soft_bounce_threshold) once it
	// has soft-bounced Count times within Within: repeated soft bounces to a dead mailbox hurt a
	// sender's reputation as a hard bounce does.
	SoftBounce SoftBounce `yaml:"soft_bounce"`
	// Scopes maps a provider's stream (the event's Stream: Postmark's MessageStream, …) to a
	// suppression scope such as marketing or transactional. An unsubscribe or complaint from a
	// mapped stream suppresses the address in that scope only; everything else, hard bounces
	// always, suppresses it globally.
	Scopes map[string]string `yaml:"scopes"`
}

// SoftBounce is the soft-bounce escalation threshold; Count 0 turns it off.
type SoftBounce struct {
	Count  int           `yaml:"count"`
	Within time.Duration `yaml:"within"`
}

func (s Suppression) validate() error {
	if s.SoftBounce.Count < 0 {
		return fmt.Errorf("config: suppression.soft_bounce.count must not be negative (0: off)")
	}
	if s.SoftBounce.Count > 0 && s.SoftBounce.Within <= 0 {
		return fmt.Errorf("config: suppression.soft_bounce.within must be positive when count is set (e.g. 168h)")
	}
	for stream, scope := range s.Scopes {
		if stream == "" {
			return fmt.Errorf("config: suppression.scopes has an empty stream name")
		}
		if !domain.ValidScope(scope) {
			return fmt.Errorf("config: suppression.scopes[%q] = %q: a scope is 1-63 lower-case letters, digits, _ or -", stream, scope)
		}
	}
	return nil
}
