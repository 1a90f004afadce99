package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"

	"github.com/mailhook/mailhook/internal/codec"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/temporalconn"
	"github.com/mailhook/mailhook/internal/temporalconn/tlstest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// codecKeys: the current key and an older one still listed for decoding.
var codecKeys = []config.CodecKey{
	{ID: "2026-05", Key: base64.StdEncoding.EncodeToString([]byte("e2e-codec-old-key-32-bytes-long!"))},
	{ID: "2026-11", Key: base64.StdEncoding.EncodeToString([]byte("e2e-codec-new-key-32-bytes-long!"))},
}

type codecHarnessOptions struct {
	dbURL     string // share another harness's database
	taskQueue string // and task queue
	noWorker  bool
}

// newCodecHarness builds mailhook the way serve.Dial does, with temporal.codec configured: the
// client comes from temporalconn.ClientOptions (the codec data converter on it) and the HTTP
// server mounts /codec. It returns the harness and a plain client (the SDK's default
// converter) for reading what Temporal actually stores.
func newCodecHarness(t *testing.T, o codecHarnessOptions) (*harness, client.Client) {
	t.Helper()
	plain := sharedTemporal(t)
	testenv.SpendConns(t, harnessConns) // on the shared PostgreSQL, as a harness
	if o.dbURL == "" {
		o.dbURL = storetest.NewDatabase(t)
	}
	if o.taskQueue == "" {
		o.taskQueue = "mailhook-e2e-codec-" + randomHex(4)
	}
	sink := newReceiver(t)
	cfg := config.Defaults()
	cfg.Database.URL = o.dbURL
	cfg.Worker.DeadlockDetectionTimeout = testenv.DeadlockDetectionTimeout
	cfg.Temporal.Address = sharedSrv.FrontendHostPort()
	cfg.Temporal.Namespace = "default"
	cfg.Temporal.TaskQueue = o.taskQueue
	cfg.Temporal.StartTimeout = 3 * time.Second
	cfg.Temporal.RetryAfter = 5 * time.Second
	cfg.Temporal.Codec = config.Codec{Keys: codecKeys, EncryptWith: "2026-11", CORSOrigins: []string{"http://127.0.0.1:8233"}}
	cfg.Notify = config.Notify{InitialInterval: 100 * time.Millisecond, MaxInterval: 500 * time.Millisecond, GiveUpAfter: time.Minute, AttemptTimeout: 5 * time.Second}
	cfg.Endpoints = []config.Endpoint{{Name: "postscale", Provider: "postscale", ProviderSettings: config.ProviderSettings{Secrets: []string{webhookSecret}}}}
	cfg.Admin.Tokens = []config.AdminToken{{Name: "e2e-operator", Token: adminToken}}
	cfg.Sinks = []config.Sink{{Name: "app", URL: sink.srv.URL, Secret: sinkSecret, Types: []string{domain.TypeStatusChanged, domain.TypeEmailReceived}}}
	if err := serve.CheckConfig(cfg); err != nil {
		t.Fatal(err)
	}
	opts, err := temporalconn.ClientOptions(cfg.Temporal, sdklog.NewStructuredLogger(testenv.Logger()), nil)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := client.Dial(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	st, err := store.Open(context.Background(), o.dbURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	svc := &serve.Service{Config: cfg, Store: st, Temporal: tc, Log: testenv.Logger(), Metrics: metrics.New()}
	api, err := svc.HTTPServer()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, cfg: cfg, svc: svc, db: storetest.NewPool(t, o.dbURL), sink: sink, prefix: randomHex(4)}
	h.api = httptest.NewServer(api.Handler())
	t.Cleanup(h.api.Close)
	if !o.noWorker {
		h.startWorker()
	}
	t.Cleanup(h.stopWorker)
	return h, plain
}

// history returns every event of a workflow's run as Temporal stores it.
func history(t *testing.T, c client.Client, workflowID string) []*historypb.HistoryEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		out = append(out, ev)
	}
	return out
}

// assertNoPlaintext fails if any stored event of the run contains one of the secrets.
func assertNoPlaintext(t *testing.T, events []*historypb.HistoryEvent, secrets ...string) {
	t.Helper()
	if len(events) < 5 {
		t.Fatalf("history has %d events", len(events))
	}
	for _, ev := range events {
		raw, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if bytes.Contains(raw, []byte(s)) {
				t.Fatalf("event %d (%s) stores %q in plaintext", ev.GetEventId(), ev.GetEventType(), s)
			}
		}
	}
}

func startedInput(t *testing.T, events []*historypb.HistoryEvent) *commonpb.Payloads {
	t.Helper()
	attrs := events[0].GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil || len(attrs.GetInput().GetPayloads()) != 1 {
		t.Fatalf("first event %s has no input", events[0].GetEventType())
	}
	return attrs.GetInput()
}

func TestCodecEncryptsWorkflowPayloadsAtRest(t *testing.T) {
	t.Parallel()
	h, plain := newCodecHarness(t, codecHarnessOptions{})
	recipient := "jane.doe+" + h.prefix + "@example.com"
	sender := "patient+" + h.prefix + "@example.org"
	mailText := "my lab results " + h.prefix

	evID, msgID := h.id("evt_codec"), h.id("msg_codec")
	bounce := fmt.Sprintf(`{"id":%q,"type":"email.bounced","created_at":%q,"data":{"email_id":%q,"from":"hello@app.example","to":%q,"subject":"Hi","bounce_type":"hard"}}`,
		evID, time.Now().UTC().Format(time.RFC3339), msgID, recipient)
	emailID := h.id("in_codec")
	inbound := `{"event":"email.received","timestamp":"2026-11-29T10:30:00Z","email_id":"` + emailID + `","message_id":"<x@example.com>","from":"` + sender +
		`","to":"support@app.example","subject":"Results","text":"` + mailText + `","html":"<p>` + mailText + `</p>","headers":[],"attachments":[],"spf":"pass","dkim":"pass"}`
	for _, body := range []string{bounce, inbound} {
		if code, resp := h.post(body); code != http.StatusOK || resp["status"] != "accepted" {
			t.Fatalf("post: %d %v", code, resp)
		}
	}

	// The pipeline works: the worker decrypts its inputs, and the sink gets plaintext.
	h.waitProcessed(evID, "email.received:"+emailID)
	h.waitDelivered(2)
	var sawBounce, sawInbound bool
	for _, d := range h.sink.delivered() {
		data, _ := d.Body["data"].(map[string]any)
		switch d.Body["type"] {
		case "message.status_changed":
			sawBounce = data["recipient"] == recipient && data["status"] == "bounced"
		case "email.received":
			payload, _ := data["payload"].(map[string]any)
			sawInbound = payload["text"] == mailText
		}
	}
	if !sawBounce || !sawInbound {
		t.Fatalf("sink notifications: %+v", h.sink.delivered())
	}
	if m := h.messageOf("postscale", msgID); m.Status != "bounced" || m.Recipient != recipient {
		t.Fatalf("message: %+v", m)
	}
	if n := h.query(`SELECT count(*) FROM suppressions WHERE address = $1`, recipient); n != 1 {
		t.Fatalf("%d suppressions for the recipient", n)
	}

	// What Temporal stores: no event of either run (inputs, activity inputs and results, the
	// result, summaries) holds the address or the mail text.
	bounceWF, inboundWF := "postscale:"+evID, "postscale:email.received:"+emailID
	// The rows are marked processed inside the run's one workflow task: the history holds its
	// markers only once that task completed, so wait for the runs to close.
	for _, wf := range []string{bounceWF, inboundWF} {
		if err := h.waitWorkflow(wf); err != nil {
			t.Fatalf("%s: %v", wf, err)
		}
	}
	bounceHist := history(t, plain, bounceWF)
	assertNoPlaintext(t, bounceHist, recipient, "jane.doe")
	assertNoPlaintext(t, history(t, plain, inboundWF), sender, mailText)
	in := startedInput(t, bounceHist)
	p := in.GetPayloads()[0]
	if got := string(p.GetMetadata()[converter.MetadataEncoding]); got != codec.EncodingEncrypted {
		t.Fatalf("input encoding %q", got)
	}
	// Summaries go through the data converter, so the codec too (docs/operations/erasure.md says so);
	// only workflow IDs and search attributes stay plain.
	if sum := bounceHist[0].GetUserMetadata().GetSummary(); sum == nil || string(sum.GetMetadata()[converter.MetadataEncoding]) != codec.EncodingEncrypted {
		t.Fatalf("the run's summary is not encrypted: %v", sum)
	}
	if got := string(p.GetMetadata()[codec.MetadataKeyID]); got != "2026-11" {
		t.Fatalf("input key id %q, want encrypt_with 2026-11", got)
	}

	// A client without the codec cannot read the result; one with it can.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res domain.Result
	if err := plain.GetWorkflow(ctx, bounceWF, "").Get(ctx, &res); err == nil {
		t.Fatalf("a plain client decoded the encrypted result: %+v", res)
	}
	if err := h.svc.Temporal.GetWorkflow(ctx, bounceWF, "").Get(ctx, &res); err != nil || res.To != "bounced" || !res.Suppressed {
		t.Fatalf("codec client result: %+v, %v", res, err)
	}

	// The codec endpoint decodes the stored input for an operator with the admin token.
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	decodeReq := func(token string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/codec/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, raw
	}
	if code, raw := decodeReq(""); code != http.StatusUnauthorized || bytes.Contains(raw, []byte("jane")) {
		t.Fatalf("decode without a token: %d %s", code, raw)
	}
	if code, _ := decodeReq("not-the-admin-token"); code != http.StatusUnauthorized {
		t.Fatalf("decode with a wrong token: %d", code)
	}
	code, raw := decodeReq(adminToken)
	if code != http.StatusOK {
		t.Fatalf("decode: %d %s", code, raw)
	}
	var decoded commonpb.Payloads
	if err := json.Unmarshal(raw, &decoded); err != nil || len(decoded.GetPayloads()) != 1 {
		t.Fatalf("decode response %s: %v", raw, err)
	}
	dp := decoded.GetPayloads()[0]
	if string(dp.GetMetadata()[converter.MetadataEncoding]) != converter.MetadataEncodingJSON || !bytes.Contains(dp.GetData(), []byte(msgID)) {
		t.Fatalf("decoded payload: %s", dp)
	}
	var input domain.EventRef
	if err := converter.GetDefaultDataConverter().FromPayload(dp, &input); err != nil || input.EventID != evID || input.MessageID != msgID {
		t.Fatalf("decoded input: %+v, %v", input, err)
	}
	if bytes.Contains(dp.GetData(), []byte(recipient)) {
		t.Fatalf("the workflow input holds the recipient: %s", dp.GetData())
	}

	// The Temporal CLI reads the history through the endpoint with --codec-auth, as the README
	// tells operators to.
	cli, err := testenv.TemporalCLI()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cli, "workflow", "show", "--address", sharedSrv.FrontendHostPort(), "--namespace", "default",
		"--workflow-id", bounceWF, "--output", "json",
		"--codec-endpoint", h.api.URL+"/codec", "--codec-auth", "Bearer "+adminToken).CombinedOutput()
	if err != nil || !payloadDataContains(string(out), msgID) {
		t.Fatalf("temporal workflow show through the codec endpoint: %v\n%s", err, out)
	}
}

// payloadDataContains reports whether any payload "data" (base64) in the CLI's JSON output
// decodes to bytes containing s.
func payloadDataContains(out, s string) bool {
	var doc any
	if json.Unmarshal([]byte(out), &doc) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if str, ok := x.(string); ok && k == "data" {
					if b, err := base64.StdEncoding.DecodeString(str); err == nil && bytes.Contains(b, []byte(s)) {
						return true
					}
				}
				if walk(x) {
					return true
				}
			}
		case []any:
			for _, x := range v {
				if walk(x) {
					return true
				}
			}
		}
		return false
	}
	return walk(doc)
}

// A run started before temporal.codec was turned on (plaintext input) is finished by a worker
// that has the codec: unencrypted payloads pass through its decoder.
func TestCodecWorkerFinishesRunsStartedBeforeEncryption(t *testing.T) {
	t.Parallel()
	testenv.ClaimConns(t, 2*harnessConns) // two harnesses
	before := newHarness(t, harnessOptions{noWorker: true})
	evID, msgID := before.id("evt_pre_codec"), before.id("msg_pre_codec")
	if code, resp := before.post(before.envelope(evID, "email.delivered", msgID, time.Now(), "")); code != http.StatusOK || resp["status"] != "accepted" {
		t.Fatalf("post: %d %v", code, resp)
	}
	after, plain := newCodecHarness(t, codecHarnessOptions{dbURL: before.cfg.Database.URL, taskQueue: before.cfg.Temporal.TaskQueue})
	wf := "postscale:" + evID
	if err := after.waitWorkflow(wf); err != nil {
		t.Fatalf("run started before the codec: %v", err)
	}
	before.waitProcessed(evID)
	after.waitDelivered(1)

	hist := history(t, plain, wf)
	if enc := string(startedInput(t, hist).GetPayloads()[0].GetMetadata()[converter.MetadataEncoding]); enc != converter.MetadataEncodingJSON {
		t.Fatalf("input recorded before the codec has encoding %q", enc)
	}
	// What the codec worker wrote afterwards (local activity markers, activity inputs, the
	// result) is encrypted.
	var encrypted int
	check := func(what string, ps []*commonpb.Payload) {
		for _, p := range ps {
			if enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc != codec.EncodingEncrypted {
				t.Fatalf("%s written by the codec worker has encoding %q", what, enc)
			}
			encrypted++
		}
	}
	for _, ev := range hist {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			check("activity "+a.GetActivityType().GetName()+" input", a.GetInput().GetPayloads())
		}
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil {
			for name, d := range m.GetDetails() {
				check("marker "+m.GetMarkerName()+" "+name, d.GetPayloads())
			}
		}
		if c := ev.GetWorkflowExecutionCompletedEventAttributes(); c != nil {
			check("result", c.GetResult().GetPayloads())
		}
	}
	if encrypted == 0 {
		t.Fatal("the codec worker wrote no payloads to the history")
	}
}

// temporal.tls reaches a Temporal frontend through TLS with a client certificate. Temporal
// Cloud itself cannot be reached from the tests; this stands a TLS-terminating proxy that
// demands a client certificate from a test CA in front of the dev server.
func TestTLSClientOptionsReachTemporal(t *testing.T) {
	t.Parallel()
	sharedTemporal(t)
	f := tlstest.Write(t, t.TempDir(), "temporal.test")
	proxy := tlsProxy(t, f.ServerConfig(t), sharedSrv.FrontendHostPort())

	cfg := config.Defaults().Temporal
	cfg.Address, cfg.Namespace = proxy, "default"
	cfg.TLS = config.TLS{Enabled: true, CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey, ServerName: f.ServerName}
	cfg.Codec = config.Codec{Keys: codecKeys, EncryptWith: "2026-05"}
	opts, err := temporalconn.ClientOptions(cfg, sdklog.NewStructuredLogger(testenv.Logger()), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		t.Fatalf("dial through mTLS: %v", err)
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"}); err != nil {
		t.Fatal(err)
	}

	// Without the client certificate the proxy refuses the connection.
	noCert := cfg
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	opts, err = temporalconn.ClientOptions(noCert, sdklog.NewStructuredLogger(testenv.Logger()), nil)
	if err != nil {
		t.Fatal(err)
	}
	shortCtx, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if c2, err := client.DialContext(shortCtx, opts); err == nil {
		c2.Close()
		t.Fatal("dialled through the mTLS proxy without a client certificate")
	}
}

// tlsProxy accepts TLS on a local port and forwards the decrypted stream to upstream.
func tlsProxy(t *testing.T, cfg *tls.Config, upstream string) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = down.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, down, up)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); pipe(up, down) }()
			go func() { defer wg.Done(); pipe(down, up) }()
		}
	}()
	return ln.Addr().String()
}

// pipe copies until either side ends (a refused handshake, a closed peer).
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}
