package workflows

// MarkSummary is markSummary, for tests.
var MarkSummary = markSummary

// SinkDetails is details, for tests.
var SinkDetails = details

// SetErasureCallsPerRun makes an Erasure run continue as new after n phase calls, so that a
// test sees it without a hundred of them; it returns the function that puts it back.
func SetErasureCallsPerRun(n int) (restore func()) {
	old := erasureCallsPerRun
	erasureCallsPerRun = n
	return func() { erasureCallsPerRun = old }
}
