package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

// kind is what went wrong with a request, as the caller needs to know it: it decides the
// answer's status and its `error`. Every 4xx and 5xx answer, on /webhooks as on /v1 and for
// paths nothing serves, is one of these, written by Server.fail; no handler writes an error
// status or body by hand.
type kind int

const (
	kindBadRequest       kind = iota // the request is not what the route takes
	kindBadPayload                   // a webhook body that cannot be accepted (malformed, nothing storable)
	kindBadControl                   // a provider control message that cannot be acted on
	kindUnauthenticated              // no admin bearer token, or not one of admin.tokens
	kindInvalidSignature             // a webhook whose signature is missing, wrong or already used
	kindForbidden                    // a codec preflight from an origin not allowed
	kindMissingScope                 // the token does not hold the scope the route needs
	kindNotFound                     // no such endpoint, message, event, suppression or route
	kindTimeout                      // the body did not arrive within http.read_timeout
	kindConflict                     // the request cannot apply to what is recorded
	kindNotConfigured                // the route needs configuration this process lacks (a 4xx: no retry helps until it is set)
	kindTooLarge                     // the body is larger than http.max_body_bytes
	kindTooManyEvents                // more events than http.max_events_per_request
	kindInternal                     // a bug (a recovered panic): not the caller's doing
	kindUnavailable                  // a dependency is unavailable: retry after Retry-After
	numKinds
)

// answerOf is a kind's answer: status, the `error` (short and stable: clients may match it) and
// the `reason` given when the handler has none more precise.
type answerOf struct {
	status int
	code   string
	reason string
}

// answers is the mapping, one row per kind. The 4xx are requests a retry cannot fix; 408 and
// the 5xx are those it may.
var answers = [numKinds]answerOf{
	kindBadRequest:       {http.StatusBadRequest, "bad request", "the request is not what this route takes"},
	kindBadPayload:       {http.StatusBadRequest, "bad payload", "the body holds nothing that can be accepted"},
	kindBadControl:       {http.StatusBadRequest, "bad control message", "the control message cannot be acted on"},
	kindUnauthenticated:  {http.StatusUnauthorized, "missing or invalid bearer token", "send Authorization: Bearer with a token of admin.tokens"},
	kindInvalidSignature: {http.StatusUnauthorized, "invalid signature", "invalid signature"},
	kindForbidden:        {http.StatusForbidden, "origin not allowed", "temporal.codec.cors_origins does not list this origin"},
	kindMissingScope:     {http.StatusForbidden, "missing scope", "this token does not hold the scope this route needs"},
	kindNotFound:         {http.StatusNotFound, "not found", "no such route"},
	kindTimeout:          {http.StatusRequestTimeout, "body not received in time", "the body did not arrive within http.read_timeout"},
	kindConflict:         {http.StatusConflict, "conflict", "the request conflicts with what is recorded"},
	kindNotConfigured:    {http.StatusConflict, "not configured", "this route needs configuration the server does not have"},
	kindTooLarge:         {http.StatusRequestEntityTooLarge, "body too large", "the body is larger than http.max_body_bytes"},
	kindTooManyEvents:    {http.StatusRequestEntityTooLarge, "too many events in one request", "more events than http.max_events_per_request"},
	kindInternal:         {http.StatusInternalServerError, "internal error", "an unexpected error; it is logged"},
	kindUnavailable:      {http.StatusServiceUnavailable, "temporarily unavailable, retry later", "a dependency is unavailable; retry after Retry-After seconds"},
}

// apiError is a failed request's answer.
type apiError struct {
	kind kind
	// reason is short and safe to send: no secrets, no addresses, no driver text. Empty gives the
	// kind's.
	reason string
	// known lists the accepted values when an unknown one was sent; limit is the limit exceeded.
	known []string
	limit int
	// status, when set, replaces the kind's (a provider that wants its refusals as another 4xx,
	// provider.Rejecter).
	status int
}

func (e *apiError) Error() string {
	_, b := e.answer()
	return b.Error + ": " + b.Reason
}

// errorBody is the one body of every error answer (the OpenAPI document's Error).
type errorBody struct {
	Error  string   `json:"error"`
	Reason string   `json:"reason"`
	Known  []string `json:"known,omitempty"`
	Limit  int      `json:"limit,omitempty"`
}

// answer is e's status and body, by the mapping.
func (e *apiError) answer() (int, errorBody) {
	a := answers[e.kind]
	status := a.status
	if e.status != 0 {
		status = e.status
	}
	b := errorBody{Error: a.code, Reason: a.reason, Known: e.known, Limit: e.limit}
	if e.reason != "" {
		b.Reason = e.reason
	}
	return status, b
}

// refuse is an apiError of kind k with reason (empty: the kind's).
func refuse(k kind, reason string) *apiError { return &apiError{kind: k, reason: reason} }

// fail answers e, ending the request's handler chain, and returns the status. A 503 carries
// Retry-After (providers and the callers of /v1 back off instead of hammering a database that is
// down); a 401 for the bearer token says which scheme to use.
func (s *Server) fail(c *gin.Context, e *apiError) int {
	s.failHeaders(c, e)
	status, body := e.answer()
	c.AbortWithStatusJSON(status, body)
	return status
}

// failHeaders sets the headers an error's kind asks for.
func (s *Server) failHeaders(c *gin.Context, e *apiError) {
	switch e.kind {
	case kindUnavailable:
		c.Header("Retry-After", strconv.Itoa(int(s.RetryAfter.Seconds())))
	case kindUnauthenticated:
		c.Header("WWW-Authenticate", `Bearer realm="mailhook"`)
	}
}

// closeUnread answers a webhook refused before its body was read, as fail does, and closes the
// connection: through the lingerer when the body is one net/http would not drain (declared
// larger than it drains, or chunked), else as net/http does.
func (s *Server) closeUnread(c *gin.Context, e *apiError) int {
	c.Header("Connection", "close")
	n := c.Request.ContentLength
	if s.linger == nil || c.Request.ProtoMajor != 1 || (n >= 0 && n <= maxDrainedBytes) {
		return s.fail(c, e)
	}
	status, body := e.answer()
	raw, err := json.Marshal(body)
	if err != nil {
		return s.fail(c, e)
	}
	s.failHeaders(c, e)
	// Declared and flushed, the answer is whole on the wire before the connection is taken.
	c.Header("Content-Length", strconv.Itoa(len(raw)))
	c.Data(status, "application/json; charset=utf-8", raw)
	c.Abort()
	c.Writer.Flush()
	// gin's own Hijack refuses once a body is written: take it from what gin wraps.
	inner, ok := c.Writer.(interface{ Unwrap() http.ResponseWriter })
	if !ok {
		return status
	}
	conn, _, err := http.NewResponseController(inner.Unwrap()).Hijack()
	if err != nil {
		return status // HTTP/2 or a recorder: net/http closes the connection as before
	}
	s.linger.close(conn)
	return status
}

// maxDrainedBytes is how much of an unread body net/http reads away to keep the connection
// (maxPostHandlerReadBytes): a refused body that size or smaller costs no lingering close.
const maxDrainedBytes = 256 << 10

// noRoute answers a path (or a method) nothing serves.
func (s *Server) noRoute(c *gin.Context) {
	s.fail(c, refuse(kindNotFound, "no such route"))
}

// recovered answers a request whose handler panicked (gin has logged the panic).
func (s *Server) recovered(c *gin.Context, _ any) {
	s.fail(c, refuse(kindInternal, ""))
}

// reasonOf is the short, safe part of an error to send back as an answer's `reason` (a rejected
// event's, a bad signature's): its innermost cause (the last one of a joined or multiply-wrapped
// error). The errors it is given (acceptance's rejections, signature and parse errors) put what
// the sender must fix innermost.
func reasonOf(err error) string {
	for {
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			errs := u.Unwrap()
			if len(errs) == 0 {
				return err.Error()
			}
			err = errs[len(errs)-1]
		case interface{ Unwrap() error }:
			next := u.Unwrap()
			if next == nil {
				return err.Error()
			}
			err = next
		default:
			return err.Error()
		}
	}
}
