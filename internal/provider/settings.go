package provider

import (
	"fmt"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/provider/allowlist"
)

// The checks below are the ones every adapter's constructor makes on the settings it shares
// with the others. They live here so that each message is written once and reads the same for
// every provider ("<adapter>: secrets[1] is empty"), and so that a new adapter gets them by
// calling them instead of copying a block. adapter is the provider name that prefixes
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

// CheckSigned makes the checks of an adapter that verifies a timestamped signature made with its
// secrets (postscale, sendgrid, mailgun, resend, standard-webhooks): RequireSecrets(adapter,
// what), ToleranceOr(adapter, def), then AllowCIDRs parsed into the allow-list Verify checks
// first. It returns the tolerance to build the scheme with; the adapter still decodes the
// secrets its own way.
func (s Settings) CheckSigned(adapter, what string, def time.Duration) (time.Duration, allowlist.List, error) {
	if err := s.RequireSecrets(adapter, what); err != nil {
		return 0, nil, err
	}
	tol, err := s.ToleranceOr(adapter, def)
	if err != nil {
		return 0, nil, err
	}
	allow, err := allowlist.Parse(adapter, s.AllowCIDRs)
	if err != nil {
		return 0, nil, err
	}
	return tol, allow, nil
}
