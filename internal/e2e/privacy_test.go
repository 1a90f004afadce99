package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// Issue 25's goal: after erasing a Postscale recipient (bounced as "Jane <…>"), a Postmark one
// (whose records have no id of their own) and one recipient of an SES notification for several,
// no column of any table, no log line of the run (debug level, the Temporal SDK's included), no
// workflow ID or search attribute in Temporal and no span attribute holds any of the three
// addresses. Not parallel: the tracer provider is the process's.
func TestErasedAddressesLeaveNoTraceAnywhere(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	logs := &testenv.Buffer{}

	// SNS's signing certificate, served over TLS at a host the endpoint trusts.
	const certPath, topic = "/SimpleNotificationService-e2e.pem", "arn:aws:sns:us-east-1:123456789012:ses-events"
	key, certs := snsCertHost(t, certPath)

	h := newHarness(t, harnessOptions{logs: logs, tracerProvider: tp,
		sinkTypes: []string{domain.TypeStatusChanged, domain.TypeSuppressionAdded},
		endpoints: []config.Endpoint{
			{Name: "postmark", Provider: "postmark", ProviderSettings: config.ProviderSettings{Secrets: []string{"hook:correct-horse"}}},
			{Name: "ses", Provider: "ses", ProviderSettings: config.ProviderSettings{TopicARNs: []string{topic}, CertHostPattern: `127\.0\.0\.1`}},
		},
		outbound: certs.Client()})
	ctx := context.Background()
	jane := "jane.ps." + h.prefix + "@example.com"
	pm := "ann.pm." + h.prefix + "@example.com"
	ses1, ses2 := "carl.ses."+h.prefix+"@example.com", "dora.ses."+h.prefix+"@example.com"
	now := time.Now().UTC()

	// Postscale: a hard bounce to a display-name form of jane.
	psID := h.id("evt_priv")
	if code, resp := h.post(fmt.Sprintf(`{"id":%q,"type":"email.bounced","created_at":%q,"data":{"email_id":%q,"to":%q,
		"bounce_type":"hard","diagnostic":"550 5.1.1 <%s>: user unknown"}}`, psID, now.Format(time.RFC3339), h.id("msg_priv"),
		"Jane <"+jane+">", jane)); code != http.StatusOK {
		t.Fatalf("postscale: %d %v", code, resp)
	}
	// Postmark: a delivery and an open, records without an ID of their own.
	for _, body := range []string{
		fmt.Sprintf(`{"RecordType":"Delivery","MessageID":%q,"Recipient":%q,"DeliveredAt":%q,"MessageStream":"outbound"}`, h.id("pm-msg"), pm, now.Format(time.RFC3339Nano)),
		fmt.Sprintf(`{"RecordType":"Open","MessageID":%q,"Recipient":%q,"ReceivedAt":%q,"MessageStream":"outbound"}`, h.id("pm-msg"), pm, now.Add(time.Minute).Format(time.RFC3339Nano)),
	} {
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/postmark", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth("hook", "correct-horse")
		if code, resp := h.do(req); code != http.StatusOK {
			t.Fatalf("postmark: %d %v", code, resp)
		}
	}
	// SES: one Bounce notification for two recipients of one mail.
	env := &providertest.SNSEnvelope{Type: "Notification", MessageID: h.id("sns"), TopicARN: topic,
		Message: fmt.Sprintf(`{"eventType":"Bounce","bounce":{"bounceType":"Permanent","bounceSubType":"General","timestamp":%q,
			"bouncedRecipients":[{"emailAddress":%q,"status":"5.1.1","diagnosticCode":"smtp; 550 5.1.1 <%s>: user unknown"},{"emailAddress":%q}]},
			"mail":{"messageId":%q,"timestamp":%q,"destination":[%q,%q]}}`,
			now.Format(time.RFC3339), ses1, ses1, ses2, h.id("ses-mail"), now.Format(time.RFC3339), ses1, ses2),
		Timestamp: now.Format(time.RFC3339), SigningCertURL: certs.URL + certPath}
	if err := env.Sign(key, "2"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/ses", strings.NewReader(string(env.Body())))
	req.Header.Set("x-amz-sns-message-type", "Notification")
	if code, resp := h.do(req); code != http.StatusOK {
		t.Fatalf("ses: %d %v", code, resp)
	}

	h.waitQuery(5, `SELECT count(*) FROM webhook_events WHERE processed_at IS NOT NULL`)
	// Three hard bounces: a status change and a suppression each, and the Postmark delivery.
	testenv.WaitAtLeast(t, "notifications the sink accepted", testenv.Stall, 7, func() int { return len(h.sink.delivered()) })
	if n := h.query(`SELECT count(*) FROM suppressions`); n != 3 {
		t.Fatalf("%d suppressions, want jane's and the two SES recipients'", n)
	}

	for _, addr := range []string{jane, pm, ses1} {
		if code, resp := h.admin(http.MethodPost, "/v1/erasures", fmt.Sprintf(`{"address":%q,"reason":"ticket 4713"}`, addr)); code != http.StatusOK {
			t.Fatalf("erase: %d %v", code, resp)
		}
	}
	erased := []string{jane, pm, ses1}
	needles := append(append([]string{}, erased...), url.QueryEscape(jane), url.QueryEscape(pm), url.QueryEscape(ses1))

	if hits, err := storetest.Hits(ctx, h.db, needles...); err != nil || len(hits) != 0 {
		t.Errorf("after the erasures an address is still in %v (%v)", hits, err)
	}
	out := logs.String()
	if !strings.Contains(out, "address erased") {
		t.Fatalf("the run's logs were not captured (%d bytes)", len(out))
	}
	holds := func(s string) string {
		for _, n := range append(needles, ses2) {
			if strings.Contains(strings.ToLower(s), strings.ToLower(n)) {
				return n
			}
		}
		return ""
	}
	if n := holds(out); n != "" {
		i := strings.Index(strings.ToLower(out), strings.ToLower(n))
		t.Errorf("a log line holds %q: …%s…", n, out[max(0, i-200):min(len(out), i+100)])
	}
	ids := h.starts.ids()
	if len(ids) < 5 {
		t.Fatalf("%d workflows started, want 5", len(ids))
	}
	for id := range ids {
		// An erasure's run is erasure:<job_id>@<task queue> on a task queue of its own, as the
		// harness's is; any other "@" would be an address's.
		rest := strings.TrimSuffix(id, "@"+h.svc.Config.Temporal.TaskQueue)
		if n := holds(id); n != "" || strings.Contains(rest, "@") {
			t.Errorf("workflow ID %q holds an address", id)
		}
		d, err := h.svc.Temporal.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatalf("describe %s: %v", id, err)
		}
		for name, p := range d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields() {
			if n := holds(string(p.GetData())); n != "" || strings.Contains(string(p.GetData()), "@") {
				t.Errorf("workflow %s: search attribute %s = %s holds an address", id, name, p.GetData())
			}
		}
	}
	spans := rec.Ended()
	if len(spans) == 0 {
		t.Fatal("no spans recorded")
	}
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			if n := holds(kv.Value.Emit()); n != "" {
				t.Errorf("span %q attribute %s holds %q", s.Name(), kv.Key, n)
			}
		}
		if n := holds(s.Name()); n != "" {
			t.Errorf("span %q is named with %q", s.Name(), n)
		}
	}
}

// An event that a version before 2026-12-02 keyed by the address (a Postmark record without an
// ID) had its runs under a workflow ID holding the address: erasing the address deletes every
// run of it (two here: the event's, and a second one of the same ID, as a redrive makes), and
// re-keys the row, so a retry of the record is still a duplicate.
func TestErasureDeletesTheRunsKeyedByTheAddress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{endpoints: []config.Endpoint{
		{Name: "postmark", Provider: "postmark", ProviderSettings: config.ProviderSettings{Secrets: []string{"hook:correct-horse"}}},
	}})
	ctx := context.Background()
	ann := "ann.runs." + h.prefix + "@example.com"
	record := fmt.Sprintf(`{"RecordType":"Delivery","MessageID":%q,"Recipient":%q,"DeliveredAt":%q,"MessageStream":"outbound"}`,
		h.id("pm-runs"), ann, time.Now().UTC().Format(time.RFC3339Nano))
	pm, err := provider.New("postmark", provider.Settings{Secrets: []string{"hook:correct-horse"}})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := pm.Parse(provider.Request{Header: http.Header{}, Body: []byte(record)})
	if err != nil {
		t.Fatal(err)
	}
	// As the version before recorded and started it.
	old := parsed[0]
	old.EventID, old.PriorEventID = parsed[0].PriorEventID, ""
	if _, err := h.svc.Store.Events.RecordEvent(ctx, old); err != nil {
		t.Fatal(err)
	}
	ref := domain.RefOf(old, domain.Route(h.cfg.SinksFor))
	opts := start.Options(ref, h.cfg.Temporal.TaskQueue)
	runID := ref.Key()
	if !strings.Contains(runID, ann) {
		t.Fatalf("the prior workflow ID %q holds no address: the test loads the wrong thing", runID)
	}
	opts.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	for range 2 {
		if _, err := h.svc.Temporal.ExecuteWorkflow(ctx, opts, domain.ProcessEventName, ref); err != nil {
			t.Fatal(err)
		}
		if err := h.waitWorkflow(runID); err != nil {
			t.Fatal(err)
		}
	}
	runs := func() int {
		resp, err := h.svc.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: h.cfg.Temporal.Namespace, Query: "WorkflowId = '" + runID + "'"})
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.GetExecutions())
	}
	testenv.WaitAtLeast(t, "runs of the prior workflow ID in visibility", testenv.Stall, 2, runs)

	if code, resp := h.admin(http.MethodPost, "/v1/erasures", fmt.Sprintf(`{"address":%q,"reason":"ticket 4714"}`, ann)); code != http.StatusOK {
		t.Fatalf("erase: %d %v", code, resp)
	}
	// Temporal deletes in the background: wait for the runs to go, as long as they keep going.
	testenv.WaitUntil(t, "the runs of the prior workflow ID deleted", testenv.Stall, func() bool {
		_, err := h.svc.Temporal.DescribeWorkflowExecution(ctx, runID, "")
		var missing *serviceerror.NotFound
		return errors.As(err, &missing) && runs() == 0
	})
	if hits, err := storetest.Hits(ctx, h.db, ann); err != nil || len(hits) != 0 {
		t.Errorf("after the erasure the address is still in %v (%v)", hits, err)
	}
	req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/postmark", strings.NewReader(record))
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth("hook", "correct-horse")
	if code, resp := h.do(req); code != http.StatusOK || resp["status"] != "duplicate" {
		t.Fatalf("Postmark's retry of the record after the erasure: %d %v, want 200 duplicate", code, resp)
	}
}
