// Package notify is mailhook's outbound notification: its wire format (body.go, order.go), the
// headers every destination carries, the one Destination interface every kind of sink is behind
// (an HTTP endpoint in httpsink, a broker in natssink, amqpsink and kafkasink), and the one error
// a failed delivery is (DeliveryError), which the delivery rules judge alike for every kind.
// Notifications are signed with Standard Webhooks so receivers can verify them with any
// off-the-shelf library.
package notify

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// DefaultTimeout bounds one attempt when a destination is given none; Standard Webhooks
// recommends 15–30 s for producers.
const DefaultTimeout = 30 * time.Second

// DeliveryError is every failure Send returns. Retryable says whether another attempt may
// succeed: network errors, timeouts, 408, 429 and 5xx are; other responses and local problems
// (bad URL, bad secret) are not.
type DeliveryError struct {
	// StatusCode is the sink's HTTP status, 0 when no response was received.
	StatusCode int
	Retryable  bool
	// RetryAfter is the delay the sink asked for in Retry-After, 0 when it did not.
	RetryAfter time.Duration
	// Body is the start of the sink's response, as valid UTF-8 without NULs so it can be stored
	// and shown as text.
	Body string
	// Err is the underlying failure when no usable response was received.
	Err error
}

func (e *DeliveryError) Error() string {
	var b strings.Builder
	b.WriteString("notify: ")
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, "sink responded %d %s", e.StatusCode, http.StatusText(e.StatusCode))
		if e.RetryAfter > 0 {
			fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
		}
		if e.Body != "" {
			fmt.Fprintf(&b, ": %s", e.Body)
		}
	} else if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("delivery failed")
	}
	return b.String()
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// Brief is Error without the sink's answer: what may go into a workflow's history, a log line or
// a metric. A sink that echoes the request would put its addresses into its answer.
func (e *DeliveryError) Brief() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("notify: sink responded %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	return e.Error()
}
