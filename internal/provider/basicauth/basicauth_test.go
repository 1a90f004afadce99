package basicauth

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestVerify(t *testing.T) {
	var s Set
	for i, p := range []string{"hook:old-pass", "hook:new-pass"} { // a rotation
		if err := s.Add("x", i, p); err != nil {
			t.Fatal(err)
		}
	}
	req := func(user, pass string) http.Header {
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		if user != "" {
			r.SetBasicAuth(user, pass)
		}
		return r.Header
	}
	for _, c := range []struct {
		h    http.Header
		want error
	}{
		{req("hook", "old-pass"), nil},
		{req("hook", "new-pass"), nil},
		{req("hook", "other"), ErrWrongCredentials},
		{req("other", "new-pass"), ErrWrongCredentials},
		{req("", ""), ErrMissingCredentials},
		{http.Header{"Authorization": {"Bearer tok"}}, ErrMissingCredentials},
	} {
		if err := s.Verify(c.h); !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%v: %v, want %v", c.h, err, c.want)
		}
	}
}

func TestAddRefusesWithoutEchoing(t *testing.T) {
	for _, bad := range []string{"no-colon-secret", ":pass-only", "user-only:"} {
		var s Set
		err := s.Add("x", 3, bad)
		if err == nil || strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "secrets[3]") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
