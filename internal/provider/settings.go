package provider

import (
	"fmt"
	"strings"
	"time"
)

// The checks below are the ones every adapter's constructor makes on the settings it shares
// with the others. They live here so that each message is written once and reads the same for
// every provider ("<adapter>: secrets[1] is empty"), and so that a new adapter gets them by
// calling two methods instead of copying a block. adapter is the provider name that prefixes
// each error; the config layer puts the endpoint's key in front of it.

// RequireSecrets returns an error unless at least one secret is configured and none is blank.
// what names one secret in the provider's own words ("webhook signing key", `"user:password"
// pair`), so the error says what to configure: "<adapter>: secrets: at least one <what> is
// required". A secret of only white space counts as blank, as it does in config.Validate: it is
// as guessable as an empty one, so it would let anyone sign. Errors name the index, never the
// secret.
func (s Settings) RequireSecrets(adapter, what string) error {
	if len(s.Secrets) == 0 {
		return fmt.Errorf("%s: secrets: at least one %s is required", adapter, what)
	}
	for i, sec := range s.Secrets {
		if strings.TrimSpace(sec) == "" {
			return fmt.Errorf("%s: secrets[%d] is empty", adapter, i)
		}
	}
	return nil
}

// ToleranceOr returns the configured tolerance, or def when it is zero (the field's documented
// "use the provider's default"). A negative tolerance is an error rather than being read as its
// absolute value or as zero: it is a typo, and either reading would silently change the replay
// window. An adapter whose default is "no check" passes def 0.
func (s Settings) ToleranceOr(adapter string, def time.Duration) (time.Duration, error) {
	switch {
	case s.Tolerance < 0:
		return 0, fmt.Errorf("%s: tolerance %s is negative", adapter, s.Tolerance)
	case s.Tolerance == 0:
		return def, nil
	default:
		return s.Tolerance, nil
	}
}
