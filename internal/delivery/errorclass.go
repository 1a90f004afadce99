package delivery

import (
	"regexp"
	"strings"
)

// Error classes of a notification's last error, as a timeline shows them: what kind of failure,
// without reading the text (which may echo a receiver's body).
const (
	ErrorTimeout   = "timeout"
	ErrorRefused   = "connection_refused"
	ErrorNetwork   = "network"
	ErrorThrottled = "throttled"
	ErrorHTTP4xx   = "http_4xx"
	ErrorHTTP5xx   = "http_5xx"
	ErrorBroker    = "broker"
	ErrorOther     = "other"
)

var statusCode = regexp.MustCompile(`\b([1-5][0-9][0-9])\b`)

// ErrorClass sorts a notification's last_error into one of the classes; "" for none.
func ErrorClass(lastError string) string {
	if lastError == "" {
		return ""
	}
	l := strings.ToLower(lastError)
	switch {
	case strings.Contains(l, "timeout"), strings.Contains(l, "deadline exceeded"), strings.Contains(l, "timed out"):
		return ErrorTimeout
	case strings.Contains(l, "connection refused"):
		return ErrorRefused
	case strings.Contains(l, "connection reset"), strings.Contains(l, "no such host"), strings.Contains(l, "eof"),
		strings.Contains(l, "broken pipe"), strings.Contains(l, "network is unreachable"):
		return ErrorNetwork
	}
	if m := statusCode.FindStringSubmatch(l); m != nil && (strings.Contains(l, "status") || strings.Contains(l, "respond") || strings.Contains(l, "http")) {
		switch {
		case m[1] == "429":
			return ErrorThrottled
		case m[1][0] == '4':
			return ErrorHTTP4xx
		case m[1][0] == '5':
			return ErrorHTTP5xx
		}
	}
	if strings.Contains(l, "nats") || strings.Contains(l, "amqp") || strings.Contains(l, "rabbitmq") || strings.Contains(l, "kafka") {
		return ErrorBroker
	}
	return ErrorOther
}
