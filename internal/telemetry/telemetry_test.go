package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mailhook/mailhook/internal/telemetry"
)

func TestEnabledOnlyWithAnEndpoint(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(v, "")
	}
	withEndpoint := telemetry.Options{OTLPEndpoint: "http://collector:4317"}
	cases := []struct {
		name string
		env  map[string]string
		cfg  telemetry.Options
		want bool
	}{
		{"nothing", nil, telemetry.Options{}, false},
		{"sampler and service name alone", map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, telemetry.Options{}, false},
		{"config endpoint", nil, withEndpoint, true},
		{"env endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, telemetry.Options{}, true},
		{"env traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317"}, telemetry.Options{}, true},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, telemetry.Options{}, true},
		{"exporter none wins", map[string]string{"OTEL_TRACES_EXPORTER": "none"}, withEndpoint, false},
		{"sdk disabled wins", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, withEndpoint, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if got := telemetry.Enabled(c.cfg); got != c.want {
				t.Fatalf("Enabled = %v, want %v", got, c.want)
			}
		})
	}
}

func TestSetupOffInstallsNothing(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	shutdown, err := telemetry.Setup(context.Background(), telemetry.Options{}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	if telemetry.Active() {
		t.Fatal("tracing is active with nothing configured")
	}
	if telemetry.GinMiddleware() != nil || telemetry.PgxTracer() != nil {
		t.Fatal("instrumentation built with tracing off")
	}
	if is, err := telemetry.TemporalInterceptors(); err != nil || is != nil {
		t.Fatalf("Temporal interceptors with tracing off: %v, %v", is, err)
	}
	if telemetry.Transport(nil) != http.DefaultTransport {
		t.Fatal("the sinks' transport is wrapped with tracing off")
	}
}

func TestSetupOnWithAnEndpoint(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "")
	shutdown, err := telemetry.Setup(context.Background(), telemetry.Options{OTLPEndpoint: "http://127.0.0.1:1"}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if !telemetry.Active() || telemetry.PgxTracer() == nil || telemetry.GinMiddleware() == nil {
		t.Fatal("tracing is not on with an endpoint configured")
	}
	// Nothing to flush: the unreachable collector is never dialled.
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if telemetry.Active() {
		t.Fatal("still active after shutdown")
	}
}

func TestResourceNamesMailhookUnlessTheEnvironmentSays(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	res, err := telemetry.Resource(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Set().Value("service.name"); v.AsString() != "mailhook" {
		t.Fatalf("service.name = %q", v.AsString())
	}
	if v, ok := res.Set().Value("service.version"); !ok || v.AsString() == "" {
		t.Fatal("no service.version")
	}
	t.Setenv("OTEL_SERVICE_NAME", "mailhook-eu")
	res, err = telemetry.Resource(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Set().Value("service.name"); v.AsString() != "mailhook-eu" {
		t.Fatalf("service.name = %q, want OTEL_SERVICE_NAME's", v.AsString())
	}
}

func TestLogHandlerAddsTheSpan(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled,
	})
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "traced")
	log.InfoContext(context.Background(), "untraced")
	log.Info("no context")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["trace_id"] != sc.TraceID().String() || rec["span_id"] != sc.SpanID().String() || rec["component"] != "test" {
		t.Fatalf("traced line: %s", lines[0])
	}
	for _, l := range lines[1:] {
		if strings.Contains(l, "trace_id") {
			t.Fatalf("untraced line has a trace id: %s", l)
		}
	}
}

func TestTransportSendsTraceparentAndNoURL(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer telemetry.Install(tp)()

	var got http.Header
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer sink.Close()

	ctx, parent := tp.Tracer("test").Start(context.Background(), "activity")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, sink.URL+"/hooks/T0/B0/secret-token?key=secret-key", strings.NewReader("{}"))
	resp, err := (&http.Client{Transport: telemetry.Transport(nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	parent.End()
	if req.Header.Get("traceparent") != "" {
		t.Fatal("the caller's request was changed")
	}

	var client sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			client = s
		}
	}
	if client == nil {
		t.Fatal("no client span")
	}
	want := "00-" + client.SpanContext().TraceID().String() + "-" + client.SpanContext().SpanID().String() + "-01"
	if tp := got.Get("traceparent"); tp != want {
		t.Fatalf("traceparent %q, want %q", tp, want)
	}
	if client.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatal("the request's span is not a child of the caller's")
	}
	attrs := map[attribute.Key]string{}
	for _, kv := range client.Attributes() {
		attrs[kv.Key] = kv.Value.Emit()
		if strings.Contains(kv.Value.Emit(), "secret") {
			t.Errorf("attribute %s carries the URL's secret: %s", kv.Key, kv.Value.Emit())
		}
	}
	if attrs["http.response.status_code"] != "503" || attrs["http.request.method"] != "POST" || attrs["server.address"] != "127.0.0.1" {
		t.Fatalf("attributes %v", attrs)
	}
	if client.Status().Code.String() != "Error" {
		t.Fatalf("a 503 is not an error: %v", client.Status())
	}
}
