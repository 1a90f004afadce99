package domain

import "testing"

func TestGrants(t *testing.T) {
	for _, tc := range []struct {
		held []string
		want string
		ok   bool
	}{
		{nil, ScopeErasure, true}, // no scopes: everything, as before scopes
		{[]string{ScopeAdmin}, ScopeCodec, true},
		{[]string{ScopeSuppressionsCheck}, ScopeSuppressionsCheck, true},
		{[]string{ScopeSuppressionsCheck}, ScopeSuppressionsRead, false},
		{[]string{ScopeSuppressionsRead}, ScopeSuppressionsCheck, true},
		{[]string{ScopeSuppressionsRead}, ScopeSuppressionsWrite, false},
		{[]string{ScopeMessagesRead, ScopeCorrections}, ScopeErasure, false},
	} {
		if got := Grants(tc.held, tc.want); got != tc.ok {
			t.Errorf("Grants(%v, %q) = %v, want %v", tc.held, tc.want, got, tc.ok)
		}
	}
}
