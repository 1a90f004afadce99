package store_test

import (
	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/domain"
)

// rules are the rules a test applies events under: a deployment's defaults (every suppression
// global, no soft-bounce escalation); a test that configures them shadows this.
var rules = apply.Rules{}

// notifying is rules with the notify decision a test wants.
type notifying struct {
	apply.Rules
	notifies func(domain.Event, domain.ApplyResult, bool) bool
}

func (r notifying) Notifies(ev domain.Event, res domain.ApplyResult, applied bool) bool {
	return r.notifies(ev, res, applied)
}
