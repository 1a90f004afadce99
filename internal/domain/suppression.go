package domain

// Suppression reasons: why an address is on the suppression list.
const (
	ReasonHardBounce  = "hard_bounce"
	ReasonComplaint   = "complaint"
	ReasonUnsubscribe = "unsubscribe"
	// ReasonSoftBounceThreshold: the address soft-bounced suppression.soft_bounce.count times
	// within its window.
	ReasonSoftBounceThreshold = "soft_bounce_threshold"
)

// SuppressionReasons lists every suppression reason.
var SuppressionReasons = []string{ReasonHardBounce, ReasonComplaint, ReasonUnsubscribe, ReasonSoftBounceThreshold}
