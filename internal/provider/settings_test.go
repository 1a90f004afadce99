package provider

import (
	"testing"
	"time"
)

func TestRequireSecrets(t *testing.T) {
	tests := map[string]struct {
		secrets []string
		want    string // the whole error; "" for none
	}{
		"nil":            {nil, "acme: secrets: at least one signing key is required"},
		"empty list":     {[]string{}, "acme: secrets: at least one signing key is required"},
		"empty secret":   {[]string{"k1", ""}, "acme: secrets[1] is empty"},
		"blank secret":   {[]string{" \t\n", "k2"}, "acme: secrets[0] is empty"},
		"one":            {[]string{"k1"}, ""},
		"several":        {[]string{"k1", "k2"}, ""},
		"padded is kept": {[]string{" k1 "}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Settings{Secrets: tc.secrets}.RequireSecrets("acme", "signing key")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("RequireSecrets: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("RequireSecrets: error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestToleranceOr(t *testing.T) {
	const def = 5 * time.Minute
	tests := map[string]struct {
		tolerance time.Duration
		def       time.Duration
		want      time.Duration
		wantErr   string
	}{
		"zero is the default":       {0, def, def, ""},
		"zero with no default":      {0, 0, 0, ""},
		"set wins over the default": {time.Hour, def, time.Hour, ""},
		"negative":                  {-time.Second, def, 0, "acme: tolerance -1s is negative"},
		"negative with no default":  {-time.Hour, 0, 0, "acme: tolerance -1h0m0s is negative"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Settings{Tolerance: tc.tolerance}.ToleranceOr("acme", tc.def)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("ToleranceOr: %v", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("ToleranceOr: error %v, want %q", err, tc.wantErr)
			case got != tc.want:
				t.Fatalf("ToleranceOr = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCheckSigned(t *testing.T) {
	const def = 5 * time.Minute
	tests := map[string]struct {
		s       Settings
		wantTol time.Duration
		wantErr string
	}{
		"missing secrets": {Settings{}, 0, "acme: secrets: at least one signing key is required"},
		"blank secret":    {Settings{Secrets: []string{" "}}, 0, "acme: secrets[0] is empty"},
		"negative":        {Settings{Secrets: []string{"k"}, Tolerance: -time.Second}, 0, "acme: tolerance -1s is negative"},
		"bad CIDR":        {Settings{Secrets: []string{"k"}, AllowCIDRs: []string{"10.0.0.0/8", "nope"}}, 0, `acme: allow_cidrs[1] "nope" is not a CIDR or an IP address`},
		"zero → default":  {Settings{Secrets: []string{"k"}, AllowCIDRs: []string{"10.0.0.0/8"}}, def, ""},
		"set":             {Settings{Secrets: []string{"k"}, Tolerance: time.Hour}, time.Hour, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tol, allow, err := tc.s.CheckSigned("acme", "signing key", def)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("CheckSigned: error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckSigned: %v", err)
			}
			if tol != tc.wantTol {
				t.Errorf("tolerance = %s, want %s", tol, tc.wantTol)
			}
			if len(allow) != len(tc.s.AllowCIDRs) || (len(allow) > 0 && !allow.Allows("10.1.2.3")) {
				t.Errorf("allow-list = %v from %v", allow, tc.s.AllowCIDRs)
			}
		})
	}
}
