package signature

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	vecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecUnix   = 1614265330
	vecBody   = `{"test": 2432232314}`
	// Self-computed (providers.md §4.4): hex, key = the whole "whsec_…" string.
	vecTimestampedHex = "2e37df5d4a028c51a7f3133d64ae1e300d2c2c900f1b1d49d4369ad2530f8964"
	// The same content signed with the base64-decoded key: the variant Postscale does not use.
	vecDecodedKeyHex = "e96203c6de850e7dc1fde7489ef6140b402d3a5a64fe250cd2eef9830fac1cef"
)

var vecNow = time.Unix(vecUnix, 0)

func TestSignTimestampedVector(t *testing.T) {
	got := signTimestamped(vecSecret, vecNow, []byte(vecBody))
	want := "t=1614265330,v1=" + vecTimestampedHex
	if got != want {
		t.Fatalf("SignTimestamped = %q, want %q", got, want)
	}
}

func TestVerifyTimestamped(t *testing.T) {
	const tol = 5 * time.Minute
	body := []byte(vecBody)
	valid := "t=1614265330,v1=" + vecTimestampedHex
	other := "whsec_b3RoZXItc2VjcmV0LW90aGVyLXNlY3JldA=="
	signedAt := func(d time.Duration) string { return signTimestamped(vecSecret, vecNow.Add(d), body) }

	tests := []struct {
		name    string
		header  string
		body    []byte
		secrets []string
		now     time.Time
		want    error
	}{
		{name: "valid", header: valid},
		{name: "valid with spaces", header: " t=1614265330 , v1=" + vecTimestampedHex + " "},
		{name: "uppercase hex", header: "t=1614265330,v1=" + strings.ToUpper(vecTimestampedHex)},
		{name: "v0 ignored", header: "t=1614265330,v0=deadbeef,v1=" + vecTimestampedHex},
		{name: "trailing comma", header: valid + ","},
		{name: "tampered body", header: valid, body: []byte(`{"test": 2432232315}`), want: ErrNoMatchingSignature},
		{name: "wrong secret", header: valid, secrets: []string{other}, want: ErrNoMatchingSignature},
		{name: "decoded-key variant rejected", header: "t=1614265330,v1=" + vecDecodedKeyHex, want: ErrNoMatchingSignature},
		{name: "two v1, second valid", header: "t=1614265330,v1=" + vecDecodedKeyHex + ",v1=" + vecTimestampedHex},
		{name: "two v1, first valid", header: "t=1614265330,v1=" + vecTimestampedHex + ",v1=" + vecDecodedKeyHex},
		{name: "two secrets, second matches", header: valid, secrets: []string{other, vecSecret}},
		{name: "empty secret skipped", header: valid, secrets: []string{"", vecSecret}},
		{name: "only empty secret", header: signTimestamped("", vecNow, body), secrets: []string{""}, want: ErrInvalidSecret},
		{name: "no secrets", header: valid, secrets: []string{}, want: ErrInvalidSecret},
		{name: "6 minutes old", header: signedAt(-6 * time.Minute), want: ErrTimestampOutOfTolerance},
		{name: "6 minutes ahead", header: signedAt(6 * time.Minute), want: ErrTimestampOutOfTolerance},
		{name: "4 minutes old", header: signedAt(-4 * time.Minute)},
		{name: "4 minutes ahead", header: signedAt(4 * time.Minute)},
		{name: "exactly at tolerance", header: signedAt(-tol)},
		{name: "far future timestamp", header: "t=999999999999999999,v1=" + vecTimestampedHex, want: ErrTimestampOutOfTolerance},
		{name: "zero now", header: valid, now: time.Time{}.Add(time.Nanosecond), want: ErrTimestampOutOfTolerance},
		{name: "missing header", header: "", want: ErrMissingSignature},
		{name: "blank header", header: "   ", want: ErrMissingSignature},
		{name: "no t", header: "v1=" + vecTimestampedHex, want: ErrMalformedSignature},
		{name: "empty t", header: "t=,v1=" + vecTimestampedHex, want: ErrMalformedSignature},
		{name: "non-numeric t", header: "t=abc,v1=" + vecTimestampedHex, want: ErrMalformedSignature},
		{name: "negative t", header: "t=-1614265330,v1=" + vecTimestampedHex, want: ErrMalformedSignature},
		{name: "plus-signed t", header: "t=+1614265330,v1=" + vecTimestampedHex, want: ErrMalformedSignature},
		{name: "overlong t", header: "t=99999999999999999999,v1=" + vecTimestampedHex, want: ErrMalformedSignature},
		{name: "two t", header: "t=1614265330,t=1614265331,v1=" + vecTimestampedHex, want: ErrMalformedSignature},
		{name: "no v1", header: "t=1614265330", want: ErrMalformedSignature},
		{name: "only v0", header: "t=1614265330,v0=" + vecTimestampedHex, want: ErrMalformedSignature},
		{name: "v1 not hex", header: "t=1614265330,v1=" + strings.Repeat("zz", 32), want: ErrMalformedSignature},
		{name: "v1 short", header: "t=1614265330,v1=abcd", want: ErrMalformedSignature},
		{name: "v1 empty", header: "t=1614265330,v1=", want: ErrMalformedSignature},
		{name: "garbage", header: "garbage", want: ErrMalformedSignature},
		{name: "binary garbage", header: "\x00\xff=\x01,,==", want: ErrMalformedSignature},
		{name: "1000 v1 entries", header: "t=1614265330" + strings.Repeat(",v1="+vecTimestampedHex, 1000), want: ErrMalformedSignature},
		{name: "65 entries", header: "t=1614265330" + strings.Repeat(",v1="+vecDecodedKeyHex, 64), want: ErrMalformedSignature},
		{name: "64 entries, last valid", header: "t=1614265330" + strings.Repeat(",v1="+vecDecodedKeyHex, 62) + ",v1=" + vecTimestampedHex},
		{name: "over 8 KiB", header: "t=1614265330,v1=" + vecTimestampedHex + ",x=" + strings.Repeat("a", MaxHeaderBytes), want: ErrMalformedSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.body == nil {
				tt.body = body
			}
			if tt.secrets == nil {
				tt.secrets = []string{vecSecret}
			}
			if tt.now.IsZero() {
				tt.now = vecNow
			}
			err := verifyTimestamped(tt.header, tt.body, tt.secrets, tol, tt.now)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("VerifyTimestamped: unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("VerifyTimestamped error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyTimestampedZeroToleranceDisablesCheck(t *testing.T) {
	h := signTimestamped(vecSecret, vecNow.Add(-48*time.Hour), []byte(vecBody))
	if err := verifyTimestamped(h, []byte(vecBody), []string{vecSecret}, 0, vecNow); err != nil {
		t.Fatalf("zero tolerance: %v", err)
	}
}

// The sentinel messages are what a 401 reports as its reason: they must stay short and must not
// echo request content.
func TestSentinelMessagesAreShortReasons(t *testing.T) {
	err := verifyTimestamped("t=1,v1="+vecTimestampedHex, []byte(vecBody), []string{vecSecret}, time.Minute, vecNow)
	if !errors.Is(err, ErrTimestampOutOfTolerance) {
		t.Fatalf("stale header: %v", err)
	}
	for _, e := range []error{ErrMissingSignature, ErrMalformedSignature, ErrTimestampOutOfTolerance, ErrNoMatchingSignature, ErrInvalidSecret} {
		if len(e.Error()) > 40 {
			t.Errorf("sentinel message too long for a JSON reason: %q", e.Error())
		}
	}
}

func TestTimestampedSignsWithEverySecret(t *testing.T) {
	other := "whsec_b3RoZXItc2VjcmV0LW90aGVyLXNlY3JldA=="
	ts, err := NewTimestamped([]string{vecSecret, other}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	header := ts.Sign(vecNow, []byte(vecBody))
	want := "t=1614265330,v1=" + vecTimestampedHex + ",v1="
	if !strings.HasPrefix(header, want) || len(header) != len(want)+64 {
		t.Fatalf("Sign = %q, want %q and a second digest", header, want)
	}
	// Each secret alone verifies the rotated header.
	for i, s := range []string{vecSecret, other} {
		if err := verifyTimestamped(header, []byte(vecBody), []string{s}, time.Minute, vecNow); err != nil {
			t.Errorf("secret %d: %v", i, err)
		}
	}
}

// signTimestamped signs with one secret, as the simulator does. An empty secret cannot build a
// scheme, so such a header is made directly: tests still present one to the verifier.
func signTimestamped(secret string, at time.Time, body []byte) string {
	ts, err := NewTimestamped([]string{secret}, 0)
	if err != nil {
		var mac [sha256.Size]byte
		unix := strconv.FormatInt(at.Unix(), 10)
		timestampedMAC(&mac, []byte(secret), unix, body)
		return "t=" + unix + ",v1=" + hex.EncodeToString(mac[:])
	}
	return ts.Sign(at, body)
}

// verifyTimestamped builds the scheme and verifies; a constructor error is returned as is.
func verifyTimestamped(header string, body []byte, secrets []string, tolerance time.Duration, now time.Time) error {
	ts, err := NewTimestamped(secrets, tolerance)
	if err != nil {
		return err
	}
	return ts.Verify(header, body, now)
}

func BenchmarkVerifyTimestamped(b *testing.B) {
	body := []byte(strings.Repeat(`{"type":"email.delivered","data":{"email_id":"msg_xyz789"}}`, 16))
	ts, err := NewTimestamped([]string{"whsec_old-secret-still-in-grace", vecSecret}, 5*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	header := signTimestamped(vecSecret, vecNow, body)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := ts.Verify(header, body, vecNow); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzVerifyTimestamped(f *testing.F) {
	f.Add("t=1614265330,v1="+vecTimestampedHex, []byte(vecBody), vecSecret, int64(vecUnix))
	f.Add("t=1614265330,v1="+vecDecodedKeyHex+",v1="+vecTimestampedHex, []byte(vecBody), vecSecret, int64(vecUnix))
	f.Add("t=1614265330,v0=abc,v1=", []byte{}, "", int64(0))
	f.Add("", []byte(nil), vecSecret, int64(vecUnix))
	f.Add("garbage", []byte("x"), "k", int64(-1))
	f.Add("t=99999999999999999999999,v1=zz", []byte("{}"), "s", int64(1<<62))
	f.Add(",,,=,=,t=,v1=,", []byte("{}"), "s", int64(0))
	f.Add("t="+strings.Repeat("9", 100), []byte("{}"), "s", int64(0))
	f.Fuzz(func(t *testing.T, header string, body []byte, secret string, nowUnix int64) {
		now := time.Unix(nowUnix, 0)
		if secret != "" && nowUnix >= 0 && nowUnix < 1e17 {
			if err := verifyTimestamped(signTimestamped(secret, now, body), body, []string{secret}, 5*time.Minute, now); err != nil {
				t.Fatalf("round trip failed: %v", err)
			}
		}
		err := verifyTimestamped(header, body, []string{secret}, 5*time.Minute, now)
		if err == nil {
			if secret == "" {
				t.Fatalf("accepted with an empty secret: %q", header)
			}
			return
		}
		for _, s := range []error{ErrMissingSignature, ErrMalformedSignature, ErrTimestampOutOfTolerance, ErrNoMatchingSignature, ErrInvalidSecret} {
			if errors.Is(err, s) {
				return
			}
		}
		t.Fatalf("error %v wraps no sentinel", err)
	})
}
