package domain

import "slices"

// Scopes an admin token may hold (admin.tokens[].scopes): what each /v1 route and the codec
// need. A token without scopes may do everything, as before scopes existed.
const (
	ScopeSuppressionsCheck = "suppressions:check" // GET /v1/suppressions/check: what a sending system needs
	ScopeSuppressionsRead  = "suppressions:read"  // list and read suppressions (and check)
	ScopeSuppressionsWrite = "suppressions:write" // lift a suppression
	ScopeMessagesRead      = "messages:read"      // read a message and its events
	ScopeCorrections       = "corrections"        // correct a message's status
	ScopeReplay            = "replay"             // replay an event, redrive events
	ScopeReportsRead       = "reports:read"       // the daily report and the quarantine
	ScopeSinksRead         = "sinks:read"         // sinks and their notifications
	ScopeSinksWrite        = "sinks:write"        // pause, resume, redeliver
	ScopeErasure           = "erasure"            // erase an address
	ScopeCodec             = "codec"              // the Temporal UI's payload codec (decodes payloads)
	ScopeAdmin             = "admin"              // every scope
)

// Scopes lists every scope.
var Scopes = []string{ScopeSuppressionsCheck, ScopeSuppressionsRead, ScopeSuppressionsWrite, ScopeMessagesRead,
	ScopeCorrections, ScopeReplay, ScopeReportsRead, ScopeSinksRead, ScopeSinksWrite, ScopeErasure, ScopeCodec, ScopeAdmin}

// Grants reports whether a token holding held may do what needs want: held names it, or admin,
// or, for the check, suppressions:read. No scopes at all grant everything.
func Grants(held []string, want string) bool {
	if len(held) == 0 || slices.Contains(held, ScopeAdmin) || slices.Contains(held, want) {
		return true
	}
	return want == ScopeSuppressionsCheck && slices.Contains(held, ScopeSuppressionsRead)
}
