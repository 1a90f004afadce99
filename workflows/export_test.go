package workflows

// MarkSummary is markSummary, for tests.
var MarkSummary = markSummary
