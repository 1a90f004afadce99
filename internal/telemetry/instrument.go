package telemetry

import (
	"errors"
	"net"
	"net/http"
	"strconv"

	"github.com/exaring/otelpgx"
	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// ScopeName is the instrumentation scope of the spans this package starts itself (Transport).
const ScopeName = "github.com/mailhook/mailhook/internal/telemetry"

// untraced are the routes probes and scrapers call every few seconds: no span for them.
var untraced = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// GinMiddleware returns the handlers that trace the HTTP API, to install first; none when
// tracing is off. Each request gets a server span named after its route ("POST
// /webhooks/:endpoint"), in the request's context for what the handler does (the insert, the
// handoff's workflow start, log lines).
//
// A request's own traceparent and baggage are ignored: webhooks come from outside, and a sender
// must not choose the trace, force sampling, or plant baggage that would travel into Temporal
// headers and the sinks' requests. The span's url.path is the route template: raw paths carry
// email addresses and message ids (/v1/suppressions/:address), which stay out of traces as
// they stay out of logs.
func GinMiddleware() []gin.HandlerFunc {
	if !Active() {
		return nil
	}
	mw := otelgin.Middleware("",
		otelgin.WithPropagators(propagation.NewCompositeTextMapPropagator()),
		otelgin.WithGinFilter(func(c *gin.Context) bool { return !untraced[c.FullPath()] }),
	)
	return []gin.HandlerFunc{mw, scrubPath}
}

func scrubPath(c *gin.Context) {
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	trace.SpanFromContext(c.Request.Context()).SetAttributes(semconv.URLPath(route))
	c.Next()
}

// TemporalInterceptors returns the Temporal tracing interceptor for client.Options.Interceptors,
// or none when tracing is off. A worker built on that client inherits it: StartWorkflow spans on
// the client, RunWorkflow, StartActivity and RunActivity spans (local activities included) on
// the worker, linked through the workflow's and activities' headers.
func TemporalInterceptors() ([]interceptor.ClientInterceptor, error) {
	if !Active() {
		return nil, nil
	}
	i, err := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{
		TextMapPropagator: Propagator(),
	})
	if err != nil {
		return nil, err
	}
	return []interceptor.ClientInterceptor{i}, nil
}

// PgxTracer returns the tracer for pgx's ConnConfig.Tracer, or nil when tracing is off. It
// records a span for each query, batch, copy, prepare and pool acquire made inside a sampled
// span (an API request, a workflow activity) and none for the rest (the relay's polls, the
// metrics gauges), so background work makes no traces. Spans carry the SQL text and the
// server, database and user names, never the query's arguments.
func PgxTracer() pgx.QueryTracer {
	if !Active() {
		return nil
	}
	return otelpgx.NewTracer(otelpgx.WithQuerySpanNamePrefix())
}

// Transport returns base (http.DefaultTransport when nil) wrapped to trace each request with a
// client span and send its context in traceparent (W3C), so the sink's own tracing continues
// the event's trace; base itself when tracing is off. The span names the method, the server's
// host and port, and the response status, and never the URL: sink URLs carry credentials in
// their path or query (notify keeps them out of errors for the same reason). otelhttp is not
// used because it records url.full.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if !Active() {
		return base
	}
	return &transport{base: base, tracer: otel.GetTracerProvider().Tracer(ScopeName), propagator: otel.GetTextMapPropagator()}
}

type transport struct {
	base       http.RoundTripper
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	host, port := req.URL.Hostname(), req.URL.Port()
	if port == "" {
		port = "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
	}
	p, _ := strconv.Atoi(port)
	ctx, span := t.tracer.Start(req.Context(), req.Method,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(req.Method), semconv.ServerAddress(host), semconv.ServerPort(p)),
	)
	defer span.End()
	// A RoundTripper must not change the caller's request.
	req = req.Clone(ctx)
	t.propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		// A transport error names the address dialled, not the URL.
		span.SetStatus(codes.Error, errorType(err))
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		return nil, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetStatus(codes.Error, "")
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
	}
	return resp, nil
}

// errorType is a low-cardinality description of a transport error.
func errorType(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Op
	}
	return "_OTHER"
}
