package providercounts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ses"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// SES reads Amazon SES's sending statistics (GetSendStatistics, SES API v1) for a region: the
// last two weeks in 15-minute data points, of which those whose Timestamp falls in the UTC day
// are summed. Credentials come from the AWS SDK's default chain (environment, shared files,
// SSO, container or instance role); the least that works is an IAM policy allowing
// ses:GetSendStatistics alone. The counts are the account's in that region, every identity and
// configuration set together: an endpoint receiving one configuration set's events sees less.
type SES struct {
	Region string
	// BaseURL replaces the region's SES endpoint (a VPC endpoint, a test's server).
	BaseURL string
	// Credentials replaces the default chain (a test's static keys); nil keeps the chain.
	Credentials aws.CredentialsProvider
	// Timeout bounds one request (0: 30 s). The SDK builds its own HTTP client so that its
	// settings (AWS_CA_BUNDLE, proxies) still apply.
	Timeout time.Duration
	// Now tells which days the two weeks still cover; nil is time.Now.
	Now func() time.Time
}

// sesWindow is how far back GetSendStatistics answers.
const sesWindow = 14 * 24 * time.Hour

// Day reads day's counts. A day that began more than two weeks ago is refused rather than
// counted: its data points are gone, and a zero would read as "nothing sent".
func (s SES) Day(ctx context.Context, day time.Time) ([]Line, error) {
	start := day.UTC().Truncate(24 * time.Hour)
	end := start.Add(24 * time.Hour)
	d := start.Format(DateLayout)
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	if start.Before(now().Add(-sesWindow)) {
		return nil, fmt.Errorf("ses send statistics for %s: %w: GetSendStatistics covers the last two weeks only", d, ErrRefused)
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(s.Region),
		// The caller's retry policy (a Temporal activity's) decides when to try again, with
		// the provider's Retry-After; the SDK's own retries would hold the activity and hide
		// that wait.
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if s.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(s.Credentials))
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	opts = append(opts, config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(timeout)))
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		// The error may quote a shared config or credentials file: it is not repeated.
		return nil, fmt.Errorf("ses send statistics for %s: %w: the AWS SDK's configuration does not load", d, ErrRefused)
	}
	client := ses.NewFromConfig(cfg, func(o *ses.Options) {
		if s.BaseURL != "" {
			o.BaseEndpoint = aws.String(s.BaseURL)
		}
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Deserialize.Insert(sendStatisticsShape, "OperationDeserializer", middleware.After)
		})
	})
	out, err := client.GetSendStatistics(ctx, &ses.GetSendStatisticsInput{})
	if err != nil {
		return nil, fmt.Errorf("ses send statistics for %s: %w", d, sesError(err))
	}
	var attempts, bounces, complaints, rejects int64
	for _, p := range out.SendDataPoints {
		if p.Timestamp == nil {
			return nil, refused("ses", http.StatusOK, "send statistics answer", errors.New("a data point without its Timestamp"))
		}
		if t := p.Timestamp.UTC(); t.Before(start) || !t.Before(end) {
			continue
		}
		attempts += p.DeliveryAttempts
		bounces += p.Bounces
		complaints += p.Complaints
		rejects += p.Rejects
	}
	// SES's sending quota counts each recipient, and these counts are taken to do the same
	// (GetSendStatistics does not say); mailhook keeps one event per recipient of a
	// notification, so the two compare one for one.
	const points = "the sum of the 15-minute data points timed in the day; the account's whole region"
	return []Line{
		{Metric: "delivery attempts", Count: attempts, Types: []string{"Send"},
			Note: `DeliveryAttempts counts what SES accepted to send, not deliveries; "Send" comes only from a ` +
				`configuration set's event publishing, never from identity notifications; ` + points},
		{Metric: "bounces", Count: bounces, Types: []string{"Bounce"},
			Note: "SES's guide calls these hard bounces, while a Bounce notification may also be Transient or Undetermined; " + points},
		{Metric: "complaints", Count: complaints, Types: []string{"Complaint"}, Note: points},
		{Metric: "rejects", Count: rejects, Types: []string{"Reject"},
			Note: `messages SES refused to send (a virus); "Reject" comes only from event publishing; ` + points},
	}, nil
}

// sesError classifies an SDK error as the HTTP providers' are: from the status code and
// Retry-After only, never the API's message. SES answers throttling with 400 and a
// Throttling code, so the SDK's list of throttle codes counts as 429.
func sesError(err error) error {
	e := &apiError{kind: ErrRefused, provider: "ses"}
	var resp *smithyhttp.ResponseError
	var send *smithyhttp.RequestSendError
	var canceled *smithy.CanceledError
	// The SDK wraps a request that got no answer in a ResponseError of status 0 too: the
	// send error is looked for first.
	switch {
	case errors.As(err, &send):
		e.kind = ErrUnavailable
		var u *url.Error
		if errors.As(send.Err, &u) {
			return fmt.Errorf("%w: %w", e, u.Err)
		}
		return e
	case errors.As(err, &resp):
		e.status = resp.HTTPStatusCode()
		var api smithy.APIError
		throttle := false
		if errors.As(err, &api) {
			_, throttle = retry.DefaultThrottleErrorCodes[api.ErrorCode()]
		}
		if e.status == http.StatusTooManyRequests || e.status >= 500 || throttle {
			e.kind = ErrUnavailable
			if resp.Response != nil {
				if s, err := strconv.Atoi(strings.TrimSpace(resp.Response.Header.Get("Retry-After"))); err == nil && s > 0 {
					e.retryAfter = time.Duration(s) * time.Second
				}
			}
		}
		if e.status >= 200 && e.status < 300 {
			return fmt.Errorf("%w: send statistics answer not in the documented shape", e)
		}
		return e
	case errors.As(err, &canceled):
		e.kind = ErrUnavailable
		return fmt.Errorf("%w: %w", e, canceled.Err)
	}
	// Not sent: most often no credentials in the chain, whose message may name files or
	// profiles; it is not repeated.
	return fmt.Errorf("ses: %w: not sent (AWS credentials or configuration)", ErrRefused)
}

// sendStatisticsShape refuses a 2xx answer without the GetSendStatisticsResult element before
// the SDK reads it: the SDK takes an empty or foreign body for a result with no data points,
// which would be counted as nothing sent.
var sendStatisticsShape = middleware.DeserializeMiddlewareFunc("MailhookSendStatisticsShape",
	func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleDeserialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		resp, ok := out.RawResponse.(*smithyhttp.Response)
		if !ok || resp.StatusCode < 200 || resp.StatusCode >= 300 {
			return out, md, err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
		_ = resp.Body.Close()
		switch {
		case err != nil:
			// The answer broke off: no whole answer, as when none came.
			return out, md, &smithyhttp.RequestSendError{Err: err}
		case len(body) > maxBody:
			return out, md, &smithy.DeserializationError{Err: fmt.Errorf("answer over %d bytes", maxBody)}
		case !bytes.Contains(body, []byte("<GetSendStatisticsResult")):
			return out, md, &smithy.DeserializationError{Err: errors.New("no GetSendStatisticsResult element")}
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return out, md, nil
	})
