package console

import "time"

// Fields is fields, for the package's tests.
var Fields = fields
var NextURL = nextURL

// The sign-in limit, for the package's tests.
const (
	SignInBurst     = signInBurst
	SignInAddresses = signInAddresses
	SignInIdleAfter = idleAfter
)

// SignInLimiter is the sign-in limiter, driven by the tests' clock.
type SignInLimiter struct{ l *signInLimiter }

func NewSignInLimiter() SignInLimiter { return SignInLimiter{&signInLimiter{}} }

// Reserve counts a failed try from addr at now: whether it was let through.
func (s SignInLimiter) Reserve(addr string, now time.Time) bool {
	_, ok, _ := s.l.reserve(addr, now)
	return ok
}

func (s SignInLimiter) Tracked() int { return s.l.tracked() }
