package e2e_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mailhook/mailhook/internal/telemetry"
	"github.com/mailhook/mailhook/internal/testenv"
)

// traceparent is W3C's header: version-traceid-parentid-flags.
var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$`)

// One signed webhook over real HTTP is one trace: the webhook request's server span, the
// handoff's StartWorkflow (a child of that request's span, although it starts after the answer),
// the workflow and its activities on the worker, their database queries, and the notification
// request, whose traceparent hands the same trace to the sink.
func TestTracingFollowsAWebhookToTheSink(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	logs := &testenv.Buffer{}
	h := newHarness(t, harnessOptions{tracerProvider: tp, logs: logs})

	evID, msgID := h.id("evt_trace"), h.id("msg_trace")
	if code, resp := h.post(h.envelope(evID, "email.delivered", msgID, time.Now(), "")); code != http.StatusOK {
		t.Fatalf("webhook: %d %v", code, resp)
	}
	if err := h.waitWorkflow("postscale:" + evID); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	testenv.WaitAtLeast(t, "notifications the sink accepted", testenv.Stall, 1, func() int { return len(h.sink.delivered()) })
	d := h.sink.delivered()[0]
	m := traceparentRE.FindStringSubmatch(d.Header.Get("traceparent"))
	if m == nil {
		t.Fatalf("the sink's request has no valid traceparent header: %q (headers %v)", d.Header.Get("traceparent"), d.Header)
	}

	// The server span: the webhook request's, named after its route, with the route as its path.
	var server sdktrace.ReadOnlySpan
	waitUntil(t, "the webhook request's server span", func() bool {
		for _, s := range rec.Ended() {
			if s.SpanKind() == trace.SpanKindServer && s.Name() == "POST /webhooks/:endpoint" {
				server = s
				return true
			}
		}
		return false
	})
	if got := attr(server, "url.path"); got != "/webhooks/:endpoint" {
		t.Errorf("server span url.path = %q, want the route template", got)
	}
	traceID := server.SpanContext().TraceID()
	if m[1] != traceID.String() {
		t.Errorf("the sink's traceparent carries trace %s, the webhook request was trace %s", m[1], traceID)
	}

	// Every part of the event's processing, in that one trace. The workflow's spans end when the
	// run does; wait for the last ones.
	var (
		start, run, activity, query, sink sdktrace.ReadOnlySpan
		names                             []string
	)
	// The count of ended spans is the progress: the wait goes on while spans keep ending.
	err := testenv.Wait("the trace's spans", testenv.Stall, func() (int64, bool, error) {
		start, run, activity, query, sink, names = nil, nil, nil, nil, nil, nil
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID() != traceID {
				continue
			}
			names = append(names, s.Name())
			switch {
			case s.Name() == "StartWorkflow:ProcessEvent":
				start = s
			case s.Name() == "RunWorkflow:ProcessEvent":
				run = s
			case strings.HasPrefix(s.Name(), "RunActivity:"):
				activity = s
			case s.InstrumentationScope().Name == "github.com/exaring/otelpgx":
				query = s
			case s.InstrumentationScope().Name == telemetry.ScopeName && s.SpanKind() == trace.SpanKindClient:
				sink = s
			}
		}
		return int64(len(rec.Ended())), start != nil && run != nil && activity != nil && query != nil && sink != nil, nil
	})
	if err != nil {
		t.Fatalf("%v: trace %s lacks a span: StartWorkflow %v, RunWorkflow %v, RunActivity %v, pgx query %v, sink request %v; it has %q",
			err, traceID, start != nil, run != nil, activity != nil, query != nil, sink != nil, names)
	}
	// The handoff started the workflow after the answer, as a child of the request's span.
	if start.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("StartWorkflow's parent is span %s, want the webhook request's %s", start.Parent().SpanID(), server.SpanContext().SpanID())
	}
	// The sink got the context of the client span that sent it.
	if m[2] != sink.SpanContext().SpanID().String() {
		t.Errorf("the sink's traceparent names span %s, the notification request's span is %s", m[2], sink.SpanContext().SpanID())
	}
	if got := attr(sink, "http.response.status_code"); got != "200" {
		t.Errorf("sink span http.response.status_code = %q, want 200", got)
	}

	// The webhook's log line leads to the trace.
	if !regexp.MustCompile(`msg=webhook .*trace_id=` + traceID.String()).MatchString(logs.String()) {
		t.Errorf("no webhook log line with trace_id=%s in:\n%s", traceID, logs.String())
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if kv.Key == attribute.Key(key) {
			return kv.Value.Emit()
		}
	}
	return ""
}
