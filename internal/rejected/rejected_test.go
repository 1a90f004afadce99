package rejected_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
	"github.com/mailhook/mailhook/internal/provider/postscale"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/rejected"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

const (
	secret = "whsec_the-test-secret"
	token  = "token-for-the-test"
)

// rig is a webhook listener over real HTTP, with a real PostgreSQL behind acceptance and the
// kept rejections.
type rig struct {
	t      testing.TB
	server *httpapi.Server
	url    string
	store  *store.Store
	rec    *rejected.Recorder
}

// newRig serves endpoints "ps" (Postscale) and "walled" (Postscale, from 10.0.0.0/8 only).
// run starts the recorder's writer; without it nothing drains its queue.
func newRig(t *testing.T, budget rejected.Budget, run bool) *rig { return newRigTB(t, budget, run) }

func newRigTB(t testing.TB, budget rejected.Budget, run bool) *rig {
	t.Helper()
	return newRigOn(t, storetest.Open(t), budget, run, secret)
}

// newRigOn is newRig over st, its endpoints verifying with secrets: a second rig over the same
// database is the process restarted with another config.
func newRigOn(t testing.TB, st *store.Store, budget rejected.Budget, run bool, secrets ...string) *rig {
	t.Helper()
	return newRigWith(t, st, &rejected.Recorder{Store: st.Rejected, Budget: budget, Retention: 24 * time.Hour}, run, secrets...)
}

// newRigWith is newRigOn with the recorder given.
func newRigWith(t testing.TB, st *store.Store, rec *rejected.Recorder, run bool, secrets ...string) *rig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	acc := acceptance.NewAcceptor(st.Inbox, nil)
	var wg sync.WaitGroup
	wg.Go(func() { acc.Run(ctx) })
	if run {
		wg.Go(func() { rec.Run(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	adapter := func(allow ...string) provider.Adapter {
		a, err := postscale.New(provider.Settings{Secrets: secrets, AllowCIDRs: allow})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	walled, err := allowlist.Parse("walled", []string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	s := &httpapi.Server{
		Endpoints: map[string]httpapi.Endpoint{
			"ps":     {Name: "ps", Provider: "postscale", Adapter: adapter()},
			"walled": {Name: "walled", Provider: "postscale", Adapter: adapter("10.0.0.0/8"), Allow: walled},
		},
		MaxBodyBytes: 16 << 10,
		Acceptor:     acc,
		Metrics:      metrics.New(),
		Log:          slog.New(slog.DiscardHandler),
		AdminTokens:  map[string]string{token: "ops"},
		Nonces:       st.Nonces,
		Rejected:     rec,
		RejectedList: st.Rejected,
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &rig{t: t, server: s, url: srv.URL, store: st, rec: rec}
}

func event(id string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":"email.delivered","created_at":%q,"data":{"email_id":"m_%s","from":"hello@app.example","to":"user@example.com","subject":"Hi"}}`,
		id, time.Now().UTC().Format(time.RFC3339), id)
}

// post sends body to endpoint, signed with key at at (unsigned when key is ""), with extra
// headers; it returns the status.
func (r *rig) post(endpoint string, body []byte, key string, at time.Time, header map[string]string) int {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.url+"/webhooks/"+endpoint, bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		providertest.SignPostscale(req, key, body, at)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

type listed struct {
	Rejections []struct {
		ID       int64               `json:"id"`
		Endpoint string              `json:"endpoint"`
		Cause    string              `json:"cause"`
		Status   int                 `json:"status"`
		Size     int64               `json:"size"`
		Headers  map[string][]string `json:"headers"`
		Body     []byte              `json:"body"`
		Reason   string              `json:"reason"`
	} `json:"rejections"`
	NextAfter string               `json:"next_after"`
	Dropped   []store.RejectedDrop `json:"dropped"`
}

func (r *rig) get(path string, out any) int { return r.call(http.MethodGet, path, out) }

func (r *rig) call(method, path string, out any) int {
	r.t.Helper()
	req, _ := http.NewRequest(method, r.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			r.t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// Every kind of refusal answers as before and is kept once with its cause, its status and what
// may be kept of it; an accepted event is not kept, and no credential header is.
func TestEachRefusalIsKeptWithItsCause(t *testing.T) {
	r := newRig(t, rejected.DefaultBudget, true)
	now := time.Now()
	badSig := event("ev_bad_signature")
	secrets := map[string]string{"Authorization": "Basic dXNlcjpwYXNz", "X-Api-Token": "tok_secret", "X-Kept": "yes"}
	cases := []struct {
		endpoint string
		body     []byte
		key      string
		at       time.Time
		header   map[string]string
		status   int
		cause    rejected.Cause
	}{
		{"nope", event("ev_unknown"), secret, now, nil, 404, rejected.UnknownEndpoint},
		{"walled", event("ev_walled"), secret, now, nil, 401, rejected.AddressNotAllowed},
		{"ps", bytes.Repeat([]byte("x"), 20<<10), secret, now, nil, 413, rejected.TooLarge},
		{"ps", badSig, "whsec_another", now, secrets, 401, rejected.BadSignature},
		{"ps", event("ev_stale"), secret, now.Add(-time.Hour), nil, 401, rejected.StaleTimestamp},
		{"ps", []byte(`{"id":`), secret, now, nil, 400, rejected.Unparsable},
		{"ps", event(strings.Repeat("i", 300)), secret, now, nil, 400, rejected.InvalidEvent},
		{"ps", event("ev_good"), secret, now, nil, 200, ""},
	}
	for _, c := range cases {
		if got := r.post(c.endpoint, c.body, c.key, c.at, c.header); got != c.status {
			t.Fatalf("%s (%s): status %d, want %d", c.cause, c.endpoint, got, c.status)
		}
	}
	var l listed
	waitFor(t, "every refusal kept", func() bool {
		l = listed{}
		return r.get("/v1/rejections", &l) == 200 && len(l.Rejections) >= len(cases)-1
	})
	if len(l.Rejections) != len(cases)-1 {
		t.Fatalf("%d kept, want %d: %+v", len(l.Rejections), len(cases)-1, l.Rejections)
	}
	// Newest first: the cases in reverse, the accepted one not among them.
	for i, k := range l.Rejections {
		c := cases[len(cases)-2-i]
		if k.Cause != string(c.cause) || k.Status != c.status {
			t.Errorf("kept #%d: cause %s status %d, want %s %d", i, k.Cause, k.Status, c.cause, c.status)
		}
		if k.Body != nil {
			t.Errorf("%s: the list carries a body", k.Cause)
		}
		if c.cause == rejected.UnknownEndpoint && k.Endpoint != "unknown" {
			t.Errorf("an unknown endpoint kept under %q, want the fixed name unknown", k.Endpoint)
		}
	}
	for _, k := range l.Rejections {
		var one listed
		var got struct {
			Cause         string              `json:"cause"`
			Headers       map[string][]string `json:"headers"`
			Body          []byte              `json:"body"`
			BodyTruncated bool                `json:"body_truncated"`
			RemoteAddr    string              `json:"remote_addr"`
		}
		_ = one
		if st := r.get(fmt.Sprint("/v1/rejections/", k.ID), &got); st != 200 {
			t.Fatalf("GET /v1/rejections/%d: %d", k.ID, st)
		}
		switch rejected.Cause(got.Cause) {
		case rejected.BadSignature:
			if !bytes.Equal(got.Body, badSig) || got.BodyTruncated {
				t.Errorf("bad signature: body %q (truncated %v), want the body sent, whole", got.Body, got.BodyTruncated)
			}
			if got.Headers["X-Kept"] == nil || got.Headers[providertest.PostscaleSignatureHeader] == nil {
				t.Errorf("bad signature: headers %v lack X-Kept or the signature, which a retry verifies", got.Headers)
			}
			for _, h := range []string{"Authorization", "X-Api-Token"} {
				if got.Headers[h] != nil {
					t.Errorf("bad signature: credential header %s kept", h)
				}
			}
			if got.RemoteAddr != "127.0.0.1" {
				t.Errorf("remote address %q, want 127.0.0.1", got.RemoteAddr)
			}
		case rejected.AddressNotAllowed, rejected.TooLarge:
			if got.Body != nil {
				t.Errorf("%s: refused unread, yet a body %q kept", got.Cause, got.Body)
			}
		}
	}
	raw, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("tok_secret")) || bytes.Contains(raw, []byte("dXNlcjpwYXNz")) {
		t.Errorf("a credential is listed: %s", raw)
	}
	var byCause listed
	if r.get("/v1/rejections?cause=stale_timestamp", &byCause); len(byCause.Rejections) != 1 {
		t.Errorf("?cause=stale_timestamp: %d rows, want 1", len(byCause.Rejections))
	}
	if st := r.get("/v1/rejections?cause=nonsense", nil); st != 400 {
		t.Errorf("?cause=nonsense: %d, want 400", st)
	}
}

// A flood of badly signed requests keeps at most the endpoint's budget and counts the rest as
// dropped; every request is answered 401, and a valid event sent in the middle is accepted.
func TestAFloodKeepsOnlyTheBudget(t *testing.T) {
	const budget, sent = 40, 400
	r := newRig(t, rejected.Budget{RowsPerHour: budget, BytesPerHour: 1 << 30, MaxBodyBytes: 1 << 10}, true)
	var wg sync.WaitGroup
	errs := make(chan string, sent)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < sent; i += 8 {
				if st := r.post("ps", event(fmt.Sprint("ev_flood_", i)), "whsec_wrong", time.Now(), nil); st != 401 {
					errs <- fmt.Sprintf("flood request %d: %d", i, st)
				}
			}
		})
	}
	if st := r.post("ps", event("ev_valid_in_flood"), secret, time.Now(), nil); st != 200 {
		t.Errorf("a valid event during the flood: %d, want 200", st)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	var l listed
	waitFor(t, "the drops counted", func() bool {
		l = listed{}
		r.get("/v1/rejections?endpoint=ps&limit=1000", &l)
		return len(l.Dropped) > 0 && l.Dropped[0].Dropped+int64(len(l.Rejections)) >= sent
	})
	if len(l.Rejections) != budget {
		t.Errorf("%d kept, want the budget, %d", len(l.Rejections), budget)
	}
	var dropped int64
	for _, d := range l.Dropped {
		dropped += d.Dropped
	}
	if dropped != sent-budget {
		t.Errorf("%d counted as dropped, want %d", dropped, sent-budget)
	}
}

// With the writer stuck (here: never run), refusals are answered as ever: the queue fills, and
// what does not fit is dropped, never waited for.
func TestAStuckWriterNeverHoldsAnAnswer(t *testing.T) {
	r := newRig(t, rejected.Budget{RowsPerHour: 1 << 20, BytesPerHour: 1 << 40, MaxBodyBytes: 64}, false)
	for i := range 1100 {
		if st := r.post("nope", []byte("{}"), "", time.Time{}, nil); st != 404 {
			t.Fatalf("request %d: %d, want 404", i, st)
		}
	}
	if st := r.post("ps", event("ev_valid_stuck"), secret, time.Now(), nil); st != 200 {
		t.Errorf("a valid event while the writer is stuck: %d, want 200", st)
	}
	r.rec.Flush(context.Background())
	var l listed
	r.get("/v1/rejections?limit=1", &l)
	var dropped int64
	for _, d := range l.Dropped {
		dropped += d.Dropped
	}
	all, _, err := r.store.Rejected.ListRejected(context.Background(), store.RejectedFilter{Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if kept := len(all); kept >= 1100 || kept == 0 || int64(kept)+dropped != 1100 {
		t.Errorf("kept %d and dropped %d of 1100, want a bounded queue's worth kept and the rest counted", kept, dropped)
	}
}

// Retention removes what was kept before it, and nothing after.
func TestRetentionRemovesOldRejections(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	now := time.Now()
	old := store.RejectedRequest{Endpoint: "ps", ReceivedAt: now.Add(-10 * 24 * time.Hour), Cause: "bad_signature", Status: 401, Header: map[string][]string{}}
	recent := old
	recent.ReceivedAt = now
	if err := st.Rejected.InsertRejected(ctx, []store.RejectedRequest{old, recent}, nil); err != nil {
		t.Fatal(err)
	}
	n, err := st.Rejected.PurgeRejected(ctx, now.Add(-7*24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("purged %d (%v), want 1", n, err)
	}
	list, _, err := st.Rejected.ListRejected(ctx, store.RejectedFilter{Limit: 10})
	if err != nil || len(list) != 1 || !list[0].ReceivedAt.After(now.Add(-time.Minute)) {
		t.Fatalf("left %+v (%v), want the recent one", list, err)
	}
}

// retention.rejected_requests: 0 keeps nothing: refusals answer as ever, none is kept or
// counted as dropped (nothing was meant to be kept), and what an earlier config kept is removed.
func TestRetentionZeroKeepsNone(t *testing.T) {
	st := storetest.Open(t)
	earlier := store.RejectedRequest{Endpoint: "ps", ReceivedAt: time.Now().Add(-time.Minute), Cause: "bad_signature", Status: 401, Header: map[string][]string{}}
	if err := st.Rejected.InsertRejected(context.Background(), []store.RejectedRequest{earlier}, nil); err != nil {
		t.Fatal(err)
	}
	r := newRigWith(t, st, &rejected.Recorder{Store: st.Rejected, Off: true}, true, secret)
	for i := range 20 {
		if got := r.post("ps", event(fmt.Sprint("ev_off_", i)), "whsec_wrong", time.Now(), nil); got != 401 {
			t.Fatalf("bad signature %d: %d, want 401", i, got)
		}
	}
	if got := r.post("nope", []byte("{}"), "", time.Time{}, nil); got != 404 {
		t.Fatalf("unknown endpoint: %d, want 404", got)
	}
	if got := r.post("ps", event("ev_off_good"), secret, time.Now(), nil); got != 200 {
		t.Fatalf("a valid event: %d, want 200", got)
	}
	var l listed
	waitFor(t, "the earlier row removed", func() bool {
		l = listed{}
		return r.get("/v1/rejections", &l) == 200 && len(l.Rejections) == 0
	})
	r.rec.Flush(context.Background())
	l = listed{}
	if r.get("/v1/rejections", &l); len(l.Rejections) != 0 || len(l.Dropped) != 0 {
		t.Errorf("kept %d, dropped %+v; want none of either", len(l.Rejections), l.Dropped)
	}
}

// A request refused for a secret the config did not have yet passes once the config has it:
// the retry accepts it as a re-delivery (a second retry, or the provider's own re-delivery, is a
// duplicate), and what each retry did is kept on the row. A request still refused answers 409
// with its cause; one kept without its body cannot be retried.
func TestARetryAcceptsWhatTodaysConfigAccepts(t *testing.T) {
	st := storetest.Open(t)
	before := newRigOn(t, st, rejected.DefaultBudget, true, secret)
	const rotated = "whsec_the-rotated-secret"
	body := event("ev_rotated")
	sentAt := time.Now()
	if got := before.post("ps", body, rotated, sentAt, nil); got != 401 {
		t.Fatalf("signed with a secret not configured yet: %d, want 401", got)
	}
	if got := before.post("ps", event("ev_forged"), "whsec_forged", time.Now(), nil); got != 401 {
		t.Fatalf("forged: %d, want 401", got)
	}
	if got := before.post("ps", bytes.Repeat([]byte("x"), 20<<10), secret, time.Now(), nil); got != 413 {
		t.Fatalf("too large: %d, want 413", got)
	}
	var l listed
	waitFor(t, "the refusals kept", func() bool {
		l = listed{}
		return before.get("/v1/rejections", &l) == 200 && len(l.Rejections) == 3
	})
	large, forged, rotatedID := l.Rejections[0].ID, l.Rejections[1].ID, l.Rejections[2].ID

	// The config fixed: both secrets, as during a rotation.
	after := newRigOn(t, st, rejected.DefaultBudget, true, secret, rotated)
	var res struct {
		Status   string `json:"status"`
		Accepted int    `json:"accepted"`
	}
	if got := after.call(http.MethodPost, fmt.Sprintf("/v1/rejections/%d/retry", rotatedID), &res); got != 200 || res.Status != "accepted" || res.Accepted != 1 {
		t.Fatalf("retry with the secret configured: %d %+v, want 200 accepted", got, res)
	}
	res.Status = ""
	if got := after.call(http.MethodPost, fmt.Sprintf("/v1/rejections/%d/retry", rotatedID), &res); got != 200 || res.Status != "duplicate" {
		t.Errorf("second retry: %d %+v, want 200 duplicate", got, res)
	}
	if got := after.post("ps", body, rotated, sentAt, nil); got != 200 {
		t.Errorf("the provider's own re-delivery after the retry: %d, want 200 (a duplicate)", got)
	}
	for id, want := range map[int64]int{forged: 409, large: 409, 999999: 404} {
		if got := after.call(http.MethodPost, fmt.Sprintf("/v1/rejections/%d/retry", id), nil); got != want {
			t.Errorf("retry %d: %d, want %d", id, got, want)
		}
	}
	for id, want := range map[int64]string{rotatedID: "duplicate", forged: "refused: bad_signature"} {
		var got struct {
			RetryResult string     `json:"retry_result"`
			RetriedAt   *time.Time `json:"retried_at"`
		}
		if after.get(fmt.Sprint("/v1/rejections/", id), &got); got.RetryResult != want || got.RetriedAt == nil {
			t.Errorf("rejection %d after its retries: %+v, want retry_result %q", id, got, want)
		}
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
