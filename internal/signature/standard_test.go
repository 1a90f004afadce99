package signature

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Published Standard Webhooks / Svix / Resend vector (providers.md §4.1).
const (
	stdID       = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	stdTS       = "1614265330"
	stdSig      = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	stdKnownBad = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
)

func TestSignStandardVector(t *testing.T) {
	for _, secret := range []string{vecSecret, strings.TrimPrefix(vecSecret, "whsec_")} {
		got, err := signStandard(secret, stdID, vecNow, []byte(vecBody))
		if err != nil {
			t.Fatalf("signStandard(%q): %v", secret, err)
		}
		if got != stdSig {
			t.Fatalf("signStandard(%q) = %q, want %q", secret, got, stdSig)
		}
	}
}

func TestSignStandardErrors(t *testing.T) {
	tests := []struct {
		name, secret, id string
	}{
		{"empty secret", "", stdID},
		{"prefix only", "whsec_", stdID},
		{"not base64", "whsec_!!!not-base64!!!", stdID},
		{"empty id", vecSecret, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := signStandard(tt.secret, tt.id, vecNow, []byte(vecBody)); err == nil {
				t.Fatal("SignStandard: expected an error")
			}
		})
	}
}

func TestVerifyStandard(t *testing.T) {
	const tol = 5 * time.Minute
	body := []byte(vecBody)
	signedAt := func(d time.Duration) (string, string) {
		ts := vecNow.Add(d)
		sig, err := signStandard(vecSecret, stdID, ts, body)
		if err != nil {
			t.Fatal(err)
		}
		return strconv.FormatInt(ts.Unix(), 10), sig
	}
	old6TS, old6Sig := signedAt(-6 * time.Minute)
	new6TS, new6Sig := signedAt(6 * time.Minute)
	old4TS, old4Sig := signedAt(-4 * time.Minute)
	new4TS, new4Sig := signedAt(4 * time.Minute)

	tests := []struct {
		name      string
		secret    string
		id, ts    string
		sig       string
		body      []byte
		tolerance time.Duration
		want      error
	}{
		{name: "published vector", sig: stdSig},
		{name: "secret without prefix", secret: strings.TrimPrefix(vecSecret, "whsec_"), sig: stdSig},
		{name: "known bad", sig: stdKnownBad, want: ErrNoMatchingSignature},
		{name: "several entries, last valid", sig: stdKnownBad + " v1a,c29tZXRoaW5n " + stdSig},
		{name: "several entries, none valid", sig: stdKnownBad + " " + stdKnownBad, want: ErrNoMatchingSignature},
		{name: "only v1a", sig: "v1a,c29tZXRoaW5n", want: ErrNoMatchingSignature},
		{name: "garbage v1 skipped", sig: "v1,!!! " + stdSig},
		{name: "tampered body", sig: stdSig, body: []byte(`{"test": 2432232315}`), want: ErrNoMatchingSignature},
		{name: "wrong id", sig: stdSig, id: "msg_other", want: ErrNoMatchingSignature},
		{name: "wrong secret", sig: stdSig, secret: "whsec_b3RoZXItc2VjcmV0LW90aGVyLXNlY3JldA==", want: ErrNoMatchingSignature},
		{name: "6 minutes old", ts: old6TS, sig: old6Sig, tolerance: tol, want: ErrTimestampOutOfTolerance},
		{name: "6 minutes ahead", ts: new6TS, sig: new6Sig, tolerance: tol, want: ErrTimestampOutOfTolerance},
		{name: "4 minutes old", ts: old4TS, sig: old4Sig, tolerance: tol},
		{name: "4 minutes ahead", ts: new4TS, sig: new4Sig, tolerance: tol},
		{name: "zero tolerance ignores age", ts: old6TS, sig: old6Sig},
		{name: "missing id", id: "-", sig: stdSig, want: ErrMissingSignature},
		{name: "missing timestamp", ts: "-", sig: stdSig, want: ErrMissingSignature},
		{name: "missing signature", sig: "", want: ErrMissingSignature},
		{name: "non-numeric timestamp", ts: "yesterday", sig: stdSig, want: ErrMalformedSignature},
		{name: "entry without comma", sig: "v1" + strings.Repeat("x", 44), want: ErrMalformedSignature},
		{name: "too many entries", sig: strings.TrimSpace(strings.Repeat(stdKnownBad+" ", 65)), want: ErrMalformedSignature},
		{name: "oversized header", sig: stdSig + " " + strings.Repeat("a", MaxHeaderBytes), want: ErrMalformedSignature},
		{name: "bad secret", secret: "whsec_***", sig: stdSig, want: ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.secret == "" {
				tt.secret = vecSecret
			}
			switch tt.id {
			case "":
				tt.id = stdID
			case "-":
				tt.id = ""
			}
			switch tt.ts {
			case "":
				tt.ts = stdTS
			case "-":
				tt.ts = ""
			}
			if tt.body == nil {
				tt.body = body
			}
			err := verifyStandard(tt.secret, tt.id, tt.ts, tt.sig, tt.body, tt.tolerance, vecNow)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("VerifyStandard: unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("VerifyStandard error = %v, want %v", err, tt.want)
			}
		})
	}
}

func BenchmarkSignStandard(b *testing.B) {
	body := []byte(strings.Repeat(`{"type":"email.delivered","data":{"email_id":"msg_xyz789"}}`, 16))
	s, err := NewStandard(vecSecret, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := s.Sign(stdID, vecNow, body); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzVerifyStandard(f *testing.F) {
	f.Add(stdID, stdTS, stdSig, []byte(vecBody))
	f.Add(stdID, stdTS, stdKnownBad+" "+stdSig, []byte(vecBody))
	f.Add("", "", "", []byte(nil))
	f.Add("x", "-1", "v1,", []byte("{}"))
	f.Add("x", "1", "v1,==== v1a,x ,,,", []byte("{}"))
	s, err := NewStandard(vecSecret, 5*time.Minute)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		// Must never panic; the result is not otherwise constrained.
		_ = s.Verify(id, ts, sig, body, vecNow)
	})
}

func signStandard(secret, id string, ts time.Time, body []byte) (string, error) {
	s, err := NewStandard(secret, 0)
	if err != nil {
		return "", err
	}
	return s.Sign(id, ts, body)
}

// verifyStandard builds the scheme and verifies; a constructor error is returned as is.
func verifyStandard(secret, id, ts, sig string, body []byte, tolerance time.Duration, now time.Time) error {
	s, err := NewStandard(secret, tolerance)
	if err != nil {
		return err
	}
	return s.Verify(id, ts, sig, body, now)
}
