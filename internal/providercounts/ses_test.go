package providercounts_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/mailhook/mailhook/internal/providercounts"
)

// sesAnswer is GetSendStatistics's documented Query-API answer, with points on the day asked
// for, one on each side of it, and one in the day's last quarter hour.
const sesAnswer = `<GetSendStatisticsResponse xmlns="http://ses.amazonaws.com/doc/2010-12-01/">
  <GetSendStatisticsResult>
    <SendDataPoints>
      <member>
        <DeliveryAttempts>8</DeliveryAttempts>
        <Timestamp>2026-12-01T19:23:00Z</Timestamp>
        <Rejects>1</Rejects>
        <Bounces>2</Bounces>
        <Complaints>1</Complaints>
      </member>
      <member>
        <DeliveryAttempts>7</DeliveryAttempts>
        <Timestamp>2026-12-01T06:53:00Z</Timestamp>
        <Rejects>0</Rejects>
        <Bounces>1</Bounces>
        <Complaints>0</Complaints>
      </member>
      <member>
        <DeliveryAttempts>3</DeliveryAttempts>
        <Timestamp>2026-12-01T23:45:00Z</Timestamp>
        <Rejects>0</Rejects>
        <Bounces>0</Bounces>
        <Complaints>2</Complaints>
      </member>
      <member>
        <DeliveryAttempts>100</DeliveryAttempts>
        <Timestamp>2026-11-30T23:59:00Z</Timestamp>
        <Rejects>100</Rejects>
        <Bounces>100</Bounces>
        <Complaints>100</Complaints>
      </member>
      <member>
        <DeliveryAttempts>100</DeliveryAttempts>
        <Timestamp>2026-12-02T00:00:00Z</Timestamp>
        <Rejects>100</Rejects>
        <Bounces>100</Bounces>
        <Complaints>100</Complaints>
      </member>
    </SendDataPoints>
  </GetSendStatisticsResult>
  <ResponseMetadata>
    <RequestId>c2b66ee5-c866-11e0-b17f-cddb0ab334db</RequestId>
  </ResponseMetadata>
</GetSendStatisticsResponse>`

// testSES is an SES counter pointed at url with static keys, on a clock two days after day.
func testSES(url string) providercounts.SES {
	return providercounts.SES{Region: "eu-west-1", BaseURL: url,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret-test-key", ""),
		Now:         func() time.Time { return day.Add(50 * time.Hour) }}
}

func TestSESDayReadsGetSendStatistics(t *testing.T) {
	var got *http.Request
	var form url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, _ := io.ReadAll(r.Body)
		form, _ = url.ParseQuery(string(b))
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write([]byte(sesAnswer))
	}))
	defer srv.Close()
	lines, err := testSES(srv.URL).Day(context.Background(), day)
	if err != nil {
		t.Fatal(err)
	}
	auth := got.Header.Get("Authorization")
	if got.Method != http.MethodPost || got.URL.Path != "/" || form.Get("Action") != "GetSendStatistics" || form.Get("Version") != "2010-12-01" ||
		!strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(auth, "/eu-west-1/ses/aws4_request") {
		t.Errorf("request %s %s %v %v", got.Method, got.URL, form, got.Header)
	}
	for typ, n := range map[string]int64{"Send": 18, "Bounce": 3, "Complaint": 3, "Reject": 1} {
		if c := countFor(lines, typ); c != n {
			t.Errorf("%s: %d, want %d", typ, c, n)
		}
	}
	if c := countFor(lines, "Delivery"); c != -1 {
		t.Errorf("Delivery is compared (%d): GetSendStatistics has no delivered count", c)
	}
}

// A day whose data points GetSendStatistics no longer keeps is refused, not counted as zero.
func TestSESDayOlderThanTwoWeeksIsRefused(t *testing.T) {
	called := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called = true
		_, _ = w.Write([]byte(sesAnswer))
	}))
	defer srv.Close()
	c := testSES(srv.URL)
	c.Now = func() time.Time { return day.Add(15 * 24 * time.Hour) }
	lines, err := c.Day(context.Background(), day)
	if !errors.Is(err, providercounts.ErrRefused) || lines != nil || called {
		t.Fatalf("lines %v, err %v, API called %v", lines, err, called)
	}
}

// SES's errors come in the Query API's XML; the SDK's error is classified by its status and
// code, and neither its message nor the credentials reach the error.
func TestSESFailuresAreErrorsNotZeroCounts(t *testing.T) {
	sesError := func(typ, code, msg string) string {
		return `<ErrorResponse xmlns="http://ses.amazonaws.com/doc/2010-12-01/"><Error><Type>` + typ + `</Type><Code>` + code +
			`</Code><Message>` + msg + `</Message></Error><RequestId>a1b2c3d4-5678-90ab-cdef-EXAMPLE11111</RequestId></ErrorResponse>`
	}
	for _, c := range []struct {
		name       string
		status     int
		retryAfter string
		body       string
		want       error
		wait       time.Duration
	}{
		{"bad key", http.StatusForbidden, "", sesError("Sender", "InvalidClientTokenId", "The security token AKIDTEST included in the request is invalid."), providercounts.ErrRefused, 0},
		{"not allowed", http.StatusForbidden, "", sesError("Sender", "AccessDenied", "User is not authorized to perform: ses:GetSendStatistics"), providercounts.ErrRefused, 0},
		{"unauthorized", http.StatusUnauthorized, "", sesError("Sender", "UnrecognizedClientException", "no"), providercounts.ErrRefused, 0},
		{"throttled", http.StatusBadRequest, "", sesError("Sender", "Throttling", "Rate exceeded"), providercounts.ErrUnavailable, 0},
		{"rate limited", http.StatusTooManyRequests, "7", sesError("Sender", "TooManyRequests", "slow down"), providercounts.ErrUnavailable, 7 * time.Second},
		{"down", http.StatusInternalServerError, "", sesError("Receiver", "InternalFailure", "The request processing has failed"), providercounts.ErrUnavailable, 0},
		{"bad gateway", http.StatusBadGateway, "", `bad gateway`, providercounts.ErrUnavailable, 0},
		{"garbled", http.StatusOK, "", `<GetSendStatisticsResponse><GetSendStatisticsResult><SendDataPoints><member><DeliveryAttempts>many`, providercounts.ErrRefused, 0},
		{"not XML", http.StatusOK, "", `{"SendDataPoints":[]}`, providercounts.ErrRefused, 0},
		{"empty", http.StatusOK, "", ``, providercounts.ErrRefused, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.retryAfter != "" {
					w.Header().Set("Retry-After", c.retryAfter)
				}
				w.Header().Set("Content-Type", "text/xml")
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			lines, err := testSES(srv.URL).Day(context.Background(), day)
			if !errors.Is(err, c.want) || lines != nil {
				t.Fatalf("%v lines, err %v, want %v", lines, err, c.want)
			}
			if w := providercounts.RetryAfter(err); w != c.wait {
				t.Errorf("retry after %s, want %s", w, c.wait)
			}
			for _, s := range []string{"AKIDTEST", "secret-test-key", "security token", "not authorized", "Rate exceeded", "processing"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the error repeats %q: %v", s, err)
				}
			}
		})
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens: no answer at all
	if _, err := testSES(srv.URL).Day(context.Background(), day); !errors.Is(err, providercounts.ErrUnavailable) {
		t.Errorf("no answer: %v, want ErrUnavailable", err)
	}
}
