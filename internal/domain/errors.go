package domain

import "errors"

// ErrNotFound is returned (wrapped) when the requested row does not exist.
var ErrNotFound = errors.New("not found")

// ErrNotApplicable wraps an event whose data cannot be applied to a message as it is (a status
// event without a message id, a correction to an unknown status): it fails the same way on every
// try, so it is quarantined.
var ErrNotApplicable = errors.New("event cannot be applied")

// ErrNoStoredEvent is returned (wrapped) for a recorded event there is nothing to process again
// from: its key is kept, its payload is not.
var ErrNoStoredEvent = errors.New("the recorded event cannot be processed again")

// ErrNotStorable wraps an event that PostgreSQL or Temporal would refuse as it is: it can never
// be accepted, so the sender is told at once (400) instead of being answered 503 for ever or
// being answered 200 and then failing every retry.
var ErrNotStorable = errors.New("event cannot be stored")

// IsDataError reports whether err is PostgreSQL refusing the data itself (SQLSTATE class 22, data
// exception; 23, integrity constraint violation, other than a unique violation, which a retry
// resolves; 54, program limit exceeded, e.g. an index row too large): retrying the same
// statement with the same values fails the same way for ever. It reads the SQLSTATE of the
// outermost error that has one (pgconn.PgError's SQLState), so it needs no driver: the store
// hides the SQLSTATE of what is not the data's fault (a missing partition).
func IsDataError(err error) bool {
	var pgErr interface{ SQLState() string }
	if !errors.As(err, &pgErr) {
		return false
	}
	code := pgErr.SQLState()
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "22", "54":
		return true
	case "23":
		return code != "23505"
	}
	return false
}
