package domain

import (
	"regexp"
	"time"
)

// MessageState is the part of a messages row that events change: what applying an event reads
// and writes.
type MessageState struct {
	Status          Status
	BounceType      string
	Recipient       string
	OrderRank       int
	OrderOccurredAt *time.Time
	OrderEventID    string
	Version         int64
	Unsubscribed    bool
	UnsubscribedAt  *time.Time
	Opens           int64
	Clicks          int64
	FirstOpenedAt   *time.Time
	FirstClickedAt  *time.Time
	CorrectedAt     *time.Time
	// Bounce is the deciding event's bounce details (zero: none), set and cleared with
	// BounceType so status and details always describe the same event.
	Bounce Bounce
}

// Rules are the decisions applying an event to its message makes, which the store runs inside
// the transaction that holds the message's row and keeps none of (internal/apply builds them
// from internal/precedence and internal/suppression and the config).
type Rules interface {
	// Apply is the message after ev, the outcome to record (Suppressed left false), and whether
	// its row changes. now stands in for an engagement event that carries no time.
	Apply(cur MessageState, ev Event, now time.Time) (next MessageState, res ApplyResult, changed bool, err error)
	// KeptBounce is the bounce details of ev its message's history keeps (zero: none).
	KeptBounce(ev Event) Bounce
	// Suppresses is the address ev suppresses (recipient: the message's), why, and in which
	// scope (GlobalScope or a configured one); ok false when it suppresses none.
	Suppresses(ev Event, recipient string) (address, reason, scope string, ok bool)
	// SoftBounce is the address ev counts as a soft bounce of, and the window the escalation
	// counts in; ok false when it is none, or the escalation is off.
	SoftBounce(ev Event, recipient string) (address string, within time.Duration, ok bool)
	// SoftBouncesSuppress reports whether n soft bounces within the window suppress the address.
	SoftBouncesSuppress(n int) bool
	// Notifies reports whether ev's outcome is notified to anyone; when not, the event is marked
	// processed in the same transaction.
	Notifies(ev Event, res ApplyResult, applied bool) bool
}

// GlobalScope is the scope that covers every kind of mail: what a hard bounce always suppresses.
const GlobalScope = "global"

// scopeName is what a suppression scope may be called: it appears in URLs (?scope=) and in the
// suppressions table, whose CHECK constraint enforces the same.
var scopeName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidScope reports whether s may name a scope (config suppression.scopes, a request's
// ?scope=): GlobalScope or a well-formed name. A well-formed name that no stream maps to is
// valid: it has no rows, and only global ones count for it.
func ValidScope(s string) bool { return scopeName.MatchString(s) }
