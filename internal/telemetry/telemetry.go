// Package telemetry is mailhook's OpenTelemetry tracing. It is off unless configured
// (telemetry.otlp_endpoint, or OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT):
// then Setup installs a TracerProvider exporting OTLP over gRPC, with the W3C tracecontext and
// baggage propagators, and the instrumentation built afterwards records spans: the HTTP API
// (GinMiddleware), the Temporal client and worker (TemporalInterceptors), PostgreSQL
// (PgxTracer) and the notification requests to sinks (Transport). Off, none of them is
// installed at all: no middleware, no interceptor, no pgx tracer, the plain HTTP transport.
//
// The exporter is OTLP/gRPC rather than OTLP/HTTP because mailhook already links gRPC (the
// Temporal client): the gRPC exporter adds no second HTTP/protobuf stack, and 4317 is what every
// collector listens on by default.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mailhook/mailhook/internal/buildinfo"
)

// ServiceName is the service.name of mailhook's spans unless OTEL_SERVICE_NAME (or
// service.name in OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const ServiceName = "mailhook"

// The standard variables that name a collector, and those that switch the SDK off.
const (
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envTracesExporter = "OTEL_TRACES_EXPORTER"
	envSDKDisabled    = "OTEL_SDK_DISABLED"
)

// Options are what the process says about tracing (config telemetry.*, converted where the
// process is wired): telemetry reads no config of its own beyond the standard OTEL_* variables.
type Options struct {
	// OTLPEndpoint is the collector's OTLP/gRPC address as a URL (http://host:4317, plaintext,
	// or https://host:4317, TLS); it takes precedence over OTEL_EXPORTER_OTLP_ENDPOINT. Empty:
	// the OTEL_* variables decide.
	OTLPEndpoint string
}

// active is set while an SDK TracerProvider is installed (Install): the instrumentation
// constructors check it, so with tracing off nothing is wrapped.
var active atomic.Bool

// Active reports whether tracing is on in this process.
func Active() bool { return active.Load() }

// Enabled reports whether the options turn tracing on: an OTLPEndpoint, or one
// of OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp
// (the SDK's default collector, localhost:4317). OTEL_SDK_DISABLED=true and
// OTEL_TRACES_EXPORTER=none turn it off whatever else is set. The other OTEL_* variables
// (service name, sampler, headers, …) only tune tracing that is on: set alone, they would send
// spans to a localhost collector that is usually not there.
func Enabled(o Options) bool {
	if strings.EqualFold(strings.TrimSpace(os.Getenv(envSDKDisabled)), "true") {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(os.Getenv(envTracesExporter))) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return o.OTLPEndpoint != "" || os.Getenv(envEndpoint) != "" || os.Getenv(envTracesEndpoint) != ""
}

// Setup turns tracing on when the options say so (Enabled) and returns the function that
// flushes and stops it; call that after the process's work has stopped. When tracing is off it
// installs nothing and shutdown does nothing. The exporter connects lazily: an unreachable
// collector costs dropped spans, logged as warnings on log, never start-up.
func Setup(ctx context.Context, o Options, log *slog.Logger) (shutdown func(context.Context) error, err error) {
	nothing := func(context.Context) error { return nil }
	if !Enabled(o) {
		return nothing, nil
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("opentelemetry", "error", err) }))
	var opts []otlptracegrpc.Option
	if o.OTLPEndpoint != "" {
		// http:// is plaintext, https:// TLS; OTEL_EXPORTER_OTLP_HEADERS and the other
		// exporter variables still apply.
		opts = append(opts, otlptracegrpc.WithEndpointURL(o.OTLPEndpoint))
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nothing, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	res, err := Resource(ctx)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nothing, err
	}
	// The sampler is the SDK's: OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG, else
	// parentbased_always_on.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	restore := Install(tp)
	endpoint := "from OTEL_EXPORTER_OTLP_*"
	if o.OTLPEndpoint != "" {
		endpoint = o.OTLPEndpoint // validated with the config: scheme://host:port, nothing secret
	}
	log.Info("tracing on: exporting spans over OTLP/gRPC", "endpoint", endpoint)
	return func(ctx context.Context) error {
		restore()
		return tp.Shutdown(ctx)
	}, nil
}

// Resource describes this process: service.name mailhook and service.version from buildinfo,
// overridden by OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func Resource(ctx context.Context) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(buildinfo.Read().Version)),
		// Last, so the environment wins.
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// Propagator is the W3C tracecontext and baggage propagator mailhook installs.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Install makes tp the global TracerProvider, with Propagator, and turns the instrumentation on
// for what is built afterwards. It returns the function that turns it off again (a no-op
// provider and propagator); instrumentation built in between keeps tp. Tests install a provider
// that records in memory.
func Install(tp trace.TracerProvider) (restore func()) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator())
	active.Store(true)
	return func() {
		active.Store(false)
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	}
}
