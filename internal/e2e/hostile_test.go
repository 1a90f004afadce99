package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/httpapi/openapitest"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/serve"
)

// hostileServer is mailhook's API served by the production http.Server (serve.NewHTTPServer:
// its read timeouts and header limit), with a wrapper that counts the body bytes the handler
// read for each request tagged with hostileCaseHeader.
type hostileServer struct {
	url   string
	addr  string
	cfg   config.Config
	mu    sync.Mutex
	reads map[string][]*countingReader
}

const hostileCaseHeader = "X-Hostile-Case"

// hostileReadTimeout is the test config's http.read_timeout: short, so the slow-client cases
// end quickly, and long enough for every honest request on a loaded 2-core machine.
const hostileReadTimeout = 2 * time.Second

func newHostileServer(t *testing.T, h *harness, readTimeout ...time.Duration) *hostileServer {
	t.Helper()
	cfg := h.cfg
	cfg.HTTP.ReadTimeout = hostileReadTimeout
	if len(readTimeout) > 0 {
		cfg.HTTP.ReadTimeout = readTimeout[0]
	}
	cfg.HTTP.Address = "127.0.0.1:0"
	api, err := h.svc.HTTPServer()
	if err != nil {
		t.Fatal(err)
	}
	hs := &hostileServer{cfg: cfg, reads: map[string][]*countingReader{}}
	inner := openapitest.Validate(t, api.Handler())
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get(hostileCaseHeader)
		if name == "" {
			inner.ServeHTTP(w, r)
			return
		}
		cr := &countingReader{r: r.Body}
		r.Body = cr
		hs.mu.Lock()
		hs.reads[name] = append(hs.reads[name], cr)
		hs.mu.Unlock()
		inner.ServeHTTP(w, r)
	})
	srv := serve.NewHTTPServer(cfg, counted)
	ln, err := net.Listen("tcp", cfg.HTTP.Address)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	hs.addr = ln.Addr().String()
	hs.url = "http://" + hs.addr
	return hs
}

// bodyRead is how many bytes of the bodies of the requests named name the handler has read so
// far (while they are read, too).
func (hs *hostileServer) bodyRead(name string) int64 {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var n int64
	for _, cr := range hs.reads[name] {
		n += cr.n.Load()
	}
	return n
}

type countingReader struct {
	r io.ReadCloser
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

// hostileResult is what came back for one hostile request.
type hostileResult struct {
	code   int // 0: the server closed the connection without an answer
	reason string
	closed bool // the server closed the connection after answering (or instead of it)
	took   time.Duration
}

// post sends a request through the Go client with the given X-Postscale-Signature value.
func (hs *hostileServer) post(t *testing.T, name string, body []byte, signatureHeader string) hostileResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, hs.url+"/webhooks/postscale", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if name != "" {
		req.Header.Set(hostileCaseHeader, name)
	}
	if signatureHeader != "" {
		req.Header.Set("X-Postscale-Signature", signatureHeader)
	}
	start := time.Now()
	resp, err := hostileClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	reason, _ := out["reason"].(string)
	return hostileResult{code: resp.StatusCode, reason: reason, took: time.Since(start)}
}

var hostileClient = &http.Client{Timeout: 30 * time.Second}

// raw speaks HTTP/1.1 over a bare TCP connection, so a test controls exactly what is sent and
// when (oversized or trickled requests) and still reads the answer if the server stops reading
// and closes. head is written as is (rawHead builds a complete one); send then writes the rest
// (its write errors are expected once the server gives up and are ignored).
func (hs *hostileServer) raw(t *testing.T, head string, send func(w io.Writer)) hostileResult {
	t.Helper()
	return hs.rawFrom(t, nil, head, send)
}

// rawFrom is raw from a local address of the caller's choosing (127.0.0.2: another client, as
// every 127/8 address is this machine's); nil lets the system choose.
func (hs *hostileServer) rawFrom(t *testing.T, local net.IP, head string, send func(w io.Writer)) hostileResult {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if local != nil {
		d.LocalAddr = &net.TCPAddr{IP: local}
	}
	conn, err := d.Dial("tcp", hs.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	go func() {
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		if send != nil {
			send(conn)
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	var res hostileResult
	resp, err := http.ReadResponse(br, nil)
	switch {
	case err == nil:
		res.code = resp.StatusCode
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		res.reason, _ = out["reason"].(string)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), isReset(err):
		// closed without an answer
	default:
		t.Fatalf("reading the answer: %v", err)
	}
	// After the answer (if any) the server must close: read until EOF or reset.
	_, err = io.Copy(io.Discard, br)
	res.closed = err == nil || isReset(err)
	res.took = time.Since(start)
	return res
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}

func rawHead(path string, headers ...string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: mailhook.test\r\nContent-Type: application/json\r\n" + strings.Join(headers, "\r\n") + "\r\n\r\n"
}

func hostileSig(body []byte, at time.Time) string {
	return providertest.PostscaleSignature(webhookSecret, at, body)
}

// hostileSigAt signs body with the literal timestamp ts. A ts that is not a non-negative int64
// (refused as malformed before any hashing) gets a well-formed but meaningless digest.
func hostileSigAt(body []byte, ts string) string {
	if n, err := strconv.ParseInt(ts, 10, 64); err == nil && n >= 0 {
		return providertest.PostscaleSignature(webhookSecret, time.Unix(n, 0), body)
	}
	return "t=" + ts + ",v1=" + strings.Repeat("0", 64)
}

func randomDigest() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestHostileRequestsAreRefusedAndStoreNothing sends requests an attacker (or a broken sender)
// could send. Each must get the right 4xx, store nothing, and leave the process serving: a valid
// request is accepted after every one of them.
func TestHostileRequestsAreRefusedAndStoreNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	hs := newHostileServer(t, h)
	limit := hs.cfg.HTTP.MaxBodyBytes
	msg := h.id("msg_hostile")
	now := time.Now

	envelope := func(id, extra string) []byte {
		return []byte(h.envelope(id, "email.delivered", msg, now(), extra))
	}
	signed := func(name string, body []byte) func(t *testing.T) hostileResult {
		return func(t *testing.T) hostileResult { return hs.post(t, name, body, hostileSig(body, now())) }
	}
	withSig := func(name string, body []byte, header func() string) func(t *testing.T) hostileResult {
		return func(t *testing.T) hostileResult { return hs.post(t, name, body, header()) }
	}

	// rawEnvelope is envelope with the id and extra spliced in byte for byte (envelope quotes
	// the id with %q, which would escape exactly the bytes these cases are about).
	rawEnvelope := func(id, extra string) []byte {
		return []byte(`{"id":"` + id + `","type":"email.delivered","created_at":"` + now().UTC().Format(time.RFC3339) +
			`","data":{"email_id":"` + msg + `","to":"user@example.com"` + extra + `}}`)
	}
	huge := envelope(h.id("evt_huge"), `,"pad":"`+strings.Repeat("x", 10<<20)+`"`)
	hugeSig := hostileSig(huge, now())

	deepOpen := []byte(strings.Repeat("[", 100_000))
	deepInEnvelope := envelope(h.id("evt_deep"), `,"meta":`+strings.Repeat("[", 100_000)+strings.Repeat("]", 100_000))

	dupSigs := func() string {
		body := envelope(h.id("evt_manysigs"), "")
		ts := strconv.FormatInt(now().Unix(), 10)
		var b strings.Builder
		b.WriteString("t=" + ts)
		for range 999 {
			b.WriteString(",v1=" + randomDigest())
		}
		// The genuine signature last: a verifier that hashed its way through the list would
		// accept it; one that refuses the oversized header first never gets there.
		_, genuine, _ := strings.Cut(hostileSig(body, now()), ",")
		b.WriteString("," + genuine)
		return b.String()
	}

	cases := []struct {
		name   string
		want   int    // status; 0 = closed without an answer
		reason string // substring of the JSON reason, when the handler answered
		do     func(t *testing.T) hostileResult
		check  func(t *testing.T, r hostileResult)
	}{
		{name: "empty body, signed", want: 400, reason: "malformed JSON", do: signed("empty-signed", nil)},
		{name: "empty body, unsigned", want: 401, reason: "missing signature", do: withSig("empty-unsigned", nil, func() string { return "" })},
		{
			name: "10 MB body with Content-Length", want: 413,
			do: func(t *testing.T) hostileResult {
				return hs.raw(t, rawHead("/webhooks/postscale", "X-Postscale-Signature: "+hugeSig,
					hostileCaseHeader+": huge-length", "Content-Length: "+strconv.Itoa(len(huge))),
					func(w io.Writer) { _, _ = w.Write(huge) })
			},
			check: func(t *testing.T, r hostileResult) {
				// Refused from the header alone: the handler reads none of it.
				if n := hs.bodyRead("huge-length"); n != 0 {
					t.Errorf("handler read %d body bytes of a declared 10 MB body, want 0", n)
				}
				if !r.closed {
					t.Errorf("connection left open after 413")
				}
			},
		},
		{
			name: "10 MB body chunked (no length)", want: 413,
			do: func(t *testing.T) hostileResult {
				return hs.raw(t, rawHead("/webhooks/postscale", "X-Postscale-Signature: "+hugeSig,
					hostileCaseHeader+": huge-chunked", "Transfer-Encoding: chunked"),
					func(w io.Writer) {
						for off := 0; off < len(huge); off += 64 << 10 {
							chunk := huge[off:min(off+64<<10, len(huge))]
							if _, err := fmt.Fprintf(w, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
								return
							}
						}
						_, _ = io.WriteString(w, "0\r\n\r\n")
					})
			},
			check: func(t *testing.T, r hostileResult) {
				if n := hs.bodyRead("huge-chunked"); n > limit+1 {
					t.Errorf("handler read %d body bytes, limit %d", n, limit)
				}
				if !r.closed {
					t.Errorf("connection left open after 413")
				}
			},
		},
		{name: "invalid UTF-8 in the event id", want: 400, reason: "not valid UTF-8", do: signed("utf8-id", rawEnvelope(h.id("evt_bad")+"\xff\xfe", ""))},
		{name: "invalid UTF-8 in another string", want: 400, reason: "not valid UTF-8", do: signed("utf8-note", rawEnvelope(h.id("evt_utf8"), ",\"note\":\"caf\xe9\""))},
		{name: "UTF-8-encoded surrogate", want: 400, reason: "not valid UTF-8", do: signed("utf8-surrogate", rawEnvelope(h.id("evt_utf8s"), ",\"note\":\"\xed\xa0\x80\""))},
		{name: "overlong UTF-8", want: 400, reason: "not valid UTF-8", do: signed("utf8-overlong", rawEnvelope(h.id("evt_utf8o"), ",\"note\":\"\xc0\xaf\""))},
		{name: "invalid UTF-8 in a key", want: 400, reason: "not valid UTF-8", do: signed("utf8-key", rawEnvelope(h.id("evt_utf8k"), ",\"\xff\":1"))},
		{name: `\u0000 in a string`, want: 400, reason: `\u0000`, do: signed("nul-escape", rawEnvelope(h.id("evt_nul"), `,"note":"a\u0000b"`))},
		{name: `\u0000 in the event id`, want: 400, reason: "NUL", do: signed("nul-id", rawEnvelope(h.id("evt_nul")+`\u0000x`, ""))},
		{name: "unpaired high surrogate escape", want: 400, reason: "surrogate", do: signed("lone-high", rawEnvelope(h.id("evt_sur"), `,"note":"\ud800x"`))},
		{name: "high surrogate escape then a non-low one", want: 400, reason: "surrogate", do: signed("high-high", rawEnvelope(h.id("evt_sur3"), `,"note":"\ud800\ud800"`))},
		{name: "unpaired low surrogate escape", want: 400, reason: "surrogate", do: signed("lone-low", rawEnvelope(h.id("evt_sur2"), `,"note":"\udc00"`))},
		{name: "100k [ (unbalanced)", want: 400, reason: "malformed JSON", do: signed("deep-open", deepOpen)},
		{name: "100k nested arrays inside a valid envelope", want: 400, reason: "malformed JSON", do: signed("deep-envelope", deepInEnvelope)},
		{name: "id is a number", want: 400, reason: `"id" is not a string`, do: signed("id-number", []byte(`{"id":12345,"type":"email.delivered","data":{"email_id":"`+msg+`"}}`))},
		{name: "id is a huge number", want: 400, reason: `"id" is not a string`, do: signed("id-1e400", []byte(`{"id":1e400,"type":"email.delivered","data":{"email_id":"`+msg+`"}}`))},
		{name: "id is an object", want: 400, reason: `"id" is not a string`, do: signed("id-object", []byte(`{"id":{"$gt":""},"type":"email.delivered","data":{"email_id":"`+msg+`"}}`))},
		{name: "id is null", want: 400, reason: `missing "id"`, do: signed("id-null", []byte(`{"id":null,"type":"email.delivered","data":{"email_id":"`+msg+`"}}`))},
		{name: "type is a number", want: 400, reason: `"type" is not a string`, do: signed("type-number", []byte(`{"id":"`+h.id("evt_tn")+`","type":7,"data":{"email_id":"`+msg+`"}}`))},
		{name: "message id is a number", want: 400, reason: "no data.email_id", do: signed("email-id-number", []byte(`{"id":"`+h.id("evt_mn")+`","type":"email.delivered","data":{"email_id":42}}`))},
		{
			name: "100 KB header value", want: http.StatusRequestHeaderFieldsTooLarge,
			do: func(t *testing.T) hostileResult {
				body := envelope(h.id("evt_bighdr"), "")
				return hs.raw(t, rawHead("/webhooks/postscale", "X-Postscale-Signature: "+hostileSig(body, now()),
					"X-Padding: "+strings.Repeat("a", 100<<10), "Content-Length: "+strconv.Itoa(len(body))),
					func(w io.Writer) { _, _ = w.Write(body) })
			},
		},
		{
			name: "signature header with 1,000 v1= entries (the genuine one last)", want: 401, reason: "malformed signature",
			do: withSig("many-sigs", envelope(h.id("evt_manysigs"), ""), dupSigs),
		},
		{name: "timestamp 0 (1970)", want: 401, reason: "timestamp outside tolerance", do: withSig("ts-zero", envelope(h.id("evt_ts0"), ""), func() string { return hostileSigAt(envelope(h.id("evt_ts0"), ""), "0") })},
		{name: "timestamp 6 minutes old", want: 401, reason: "timestamp outside tolerance", do: withSig("ts-old", envelope(h.id("evt_ts6"), ""), func() string { return hostileSig(envelope(h.id("evt_ts6"), ""), now().Add(-6*time.Minute)) })},
		{name: "timestamp a year ahead", want: 401, reason: "timestamp outside tolerance", do: withSig("ts-future", envelope(h.id("evt_tsf"), ""), func() string { return hostileSig(envelope(h.id("evt_tsf"), ""), now().AddDate(1, 0, 0)) })},
		{name: "timestamp year ~31 billion (18 digits)", want: 401, reason: "timestamp outside tolerance", do: withSig("ts-18", envelope(h.id("evt_ts18"), ""), func() string { return hostileSigAt(envelope(h.id("evt_ts18"), ""), "999999999999999999") })},
		{name: "timestamp 19 digits (overflows int64)", want: 401, reason: "malformed signature", do: withSig("ts-19", envelope(h.id("evt_ts19"), ""), func() string { return hostileSigAt(envelope(h.id("evt_ts19"), ""), "9999999999999999999") })},
		{name: "negative timestamp", want: 401, reason: "malformed signature", do: withSig("ts-neg", envelope(h.id("evt_tsn"), ""), func() string { return hostileSigAt(envelope(h.id("evt_tsn"), ""), "-60") })},
		{
			name: "slow body (1 byte every 100 ms)", want: http.StatusRequestTimeout,
			do: func(t *testing.T) hostileResult {
				body := envelope(h.id("evt_slow"), "")
				return hs.raw(t, rawHead("/webhooks/postscale", "X-Postscale-Signature: "+hostileSig(body, now()),
					hostileCaseHeader+": slow-body", "Content-Length: "+strconv.Itoa(len(body))),
					func(w io.Writer) {
						for i := range body {
							if _, err := w.Write(body[i : i+1]); err != nil {
								return
							}
							time.Sleep(100 * time.Millisecond)
						}
					})
			},
			check: func(t *testing.T, r hostileResult) {
				if !r.closed || r.took > hostileReadTimeout+3*time.Second {
					t.Errorf("slow body: closed=%v after %s, want closed within read_timeout %s", r.closed, r.took, hostileReadTimeout)
				}
			},
		},
		{
			name: "slow headers (1 byte every 100 ms)", want: 0,
			do: func(t *testing.T) hostileResult {
				return hs.raw(t, "POST /webhooks/postscale HTTP/1.1\r\nHost: mailhook.test\r\nX-Slow: ", func(w io.Writer) {
					for range 300 {
						if _, err := io.WriteString(w, "a"); err != nil {
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				})
			},
			check: func(t *testing.T, r hostileResult) {
				// The header timeout is never longer than read_timeout (10 s by itself).
				if !r.closed || r.took > hostileReadTimeout+3*time.Second {
					t.Errorf("slow headers: closed=%v after %s, want closed within read_timeout %s", r.closed, r.took, hostileReadTimeout)
				}
			},
		},
	}

	var valid []string
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.do(t)
			t.Logf("%d (reason %q) in %s", r.code, r.reason, r.took.Round(time.Millisecond))
			if r.code != tc.want {
				t.Errorf("status %d, want %d", r.code, tc.want)
			}
			if tc.reason != "" && !strings.Contains(r.reason, tc.reason) {
				t.Errorf("reason %q, want it to mention %q", r.reason, tc.reason)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
			// Refused requests start no workflow, so nothing can be stored later either.
			if n := h.query(`SELECT count(*) FROM webhook_events WHERE NOT (event_id = ANY($1))`, valid); n != 0 {
				t.Errorf("webhook_events has %d rows besides the valid requests'", n)
			}
			// The process is unharmed: a valid request right after is accepted.
			id := h.id(fmt.Sprintf("evt_after_%02d", i))
			body := []byte(h.envelope(id, "email.opened", msg, now(), ""))
			if r := hs.post(t, "", body, hostileSig(body, now())); r.code != 200 {
				t.Fatalf("valid request after %q: %d", tc.name, r.code)
			}
			valid = append(valid, id)
		})
	}
	h.waitProcessed(valid...)
	if n := h.query(`SELECT count(*) FROM webhook_events`); n != len(valid) {
		t.Fatalf("webhook_events has %d rows, want %d: a refused request was stored", n, len(valid))
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE NOT (event_id = ANY($1))`, valid); n != 0 {
		t.Fatalf("%d rows of refused requests stored", n)
	}
}

// TestOddButSignedBodiesAreProcessed: bodies that are strange but storable are accepted and
// processed, not refused and not poisoned. Duplicate keys: encoding/json keeps the last value,
// and so does PostgreSQL's jsonb, so the id that dedupes, the stored payload and the
// notification all agree. An attacker gains nothing: the signature covers the raw bytes, so only
// a holder of the secret can send such a body, and they could sign any body they like.
func TestOddButSignedBodiesAreProcessed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	first, last := h.id("evt_dup_first"), h.id("evt_dup_last")
	dup := fmt.Sprintf(`{"id":%q,"type":"email.sent","created_at":%q,"data":{"email_id":%q,"email_id":%q,"to":"user@example.com"},"id":%q,"type":"email.delivered"}`,
		first, time.Now().UTC().Format(time.RFC3339), h.id("msg_dup_first"), h.id("msg_dup_last"), last)
	if code, resp := h.post(dup); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("duplicate keys: %d %v", code, resp)
	}
	h.waitProcessed(last)
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1`, first); n != 0 {
		t.Fatalf("the first of two ids was stored")
	}
	if n := h.query(`SELECT count(*) FROM webhook_events w JOIN event_payloads p USING (provider, event_id, received_at)
		WHERE event_id = $1 AND w.event_type = 'email.delivered' AND w.message_id = $2 AND p.payload->>'id' = $1 AND p.payload->'data'->>'email_id' = $2`, last, h.id("msg_dup_last")); n != 1 {
		t.Fatalf("stored row does not carry the last id, type and message id")
	}
	if m := h.messageOf("postscale", h.id("msg_dup_last")); m.Status != "delivered" {
		t.Fatalf("message status %q, want delivered (the last type)", m.Status)
	}
	h.waitDelivered(1)
	d := h.sink.delivered()[0]
	if data, _ := d.Body["data"].(map[string]any); data["event_id"] != last || data["message_id"] != h.id("msg_dup_last") {
		t.Fatalf("notification data %v, want the last id and message id", d.Body["data"])
	}

	// Escapes PostgreSQL does store: a paired surrogate (an emoji) and other control escapes;
	// an occurred_at at the end of year 9999.
	odd := h.id("evt_odd")
	body := fmt.Sprintf(`{"id":%q,"type":"email.delivered","created_at":"9999-12-31T23:59:59Z","data":{"email_id":%q,"subject":"\ud83d\ude00 \u0001\t\\u0000 caf\u00e9"}}`,
		odd, h.id("msg_odd"))
	if code, resp := h.post(body); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("odd but storable: %d %v", code, resp)
	}
	h.waitProcessed(odd)
}

// TestBadSignatureFloodDoesNotStarveValidTraffic: 2,000 requests with bad signatures from 8
// goroutines while valid traffic continues. Every valid request must be accepted; the latency of
// valid requests with and without the flood is logged (not asserted: it depends on the machine).
func TestBadSignatureFloodDoesNotStarveValidTraffic(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	hs := newHostileServer(t, h)
	msg := h.id("msg_flood")

	var n atomic.Int64
	validOne := func(t *testing.T) (string, time.Duration) {
		id := h.id(fmt.Sprintf("evt_valid_%04d", n.Add(1)))
		body := []byte(h.envelope(id, "email.opened", msg, time.Now(), ""))
		r := hs.post(t, "", body, hostileSig(body, time.Now()))
		if r.code != 200 {
			t.Errorf("valid request %s: %d", id, r.code)
		}
		return id, r.took
	}
	var ids []string
	// Warm up connections and the worker.
	for range 5 {
		id, _ := validOne(t)
		ids = append(ids, id)
	}

	const quiet = 100
	var base []time.Duration
	for range quiet {
		id, took := validOne(t)
		ids, base = append(ids, id), append(base, took)
	}

	const flood, workers = 2000, 8
	pad := strings.Repeat("x", 4<<10) // a 4 KB body: each bad request costs one HMAC over it
	var sent, refused atomic.Int64
	var wg sync.WaitGroup
	floodStart := time.Now()
	floodClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	for w := range workers {
		wg.Go(func() {
			for i := range flood / workers {
				body := h.envelope(h.id(fmt.Sprintf("evt_forged_%d_%d", w, i)), "email.bounced", msg, time.Now(), `,"pad":"`+pad+`"`)
				req, _ := http.NewRequest(http.MethodPost, hs.url+"/webhooks/postscale", strings.NewReader(body))
				// Signed with a wrong secret: well-formed, so the verifier hashes the body.
				req.Header.Set("X-Postscale-Signature", providertest.PostscaleSignature("whsec_forged", time.Now(), []byte(body)))
				resp, err := floodClient.Do(req)
				sent.Add(1)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusUnauthorized {
					refused.Add(1)
				}
			}
		})
	}
	floodDone := make(chan struct{})
	go func() { wg.Wait(); close(floodDone) }()
	var during []time.Duration
	for loop := true; loop; {
		select {
		case <-floodDone:
			loop = false
		default:
			id, took := validOne(t)
			ids, during = append(ids, id), append(during, took)
		}
	}
	floodTook := time.Since(floodStart)
	floodClient.CloseIdleConnections()

	if refused.Load() != flood {
		t.Errorf("%d of %d forged requests got 401", refused.Load(), flood)
	}
	h.waitProcessed(ids...)
	if got := h.query(`SELECT count(*) FROM webhook_events`); got != len(ids) {
		t.Fatalf("webhook_events has %d rows, want the %d valid events", got, len(ids))
	}
	t.Logf("valid request latency without flood (n=%d): %s", len(base), latencySummary(base))
	t.Logf("valid request latency during flood  (n=%d): %s", len(during), latencySummary(during))
	t.Logf("flood: %d forged requests from %d goroutines in %s (%.0f req/s), all 401", sent.Load(), workers, floodTook.Round(time.Millisecond), float64(sent.Load())/floodTook.Seconds())
}

func latencySummary(d []time.Duration) string {
	if len(d) == 0 {
		return "no samples"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s",
		q(0.5).Round(10*time.Microsecond), q(0.9).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), s[len(s)-1].Round(10*time.Microsecond))
}

// A NUL or an invalid UTF-8 byte in an admin path or query parameter is the caller's mistake: 400
// naming the parameter, never the 503 "retry later" that PostgreSQL's refusal of such text
// used to become.
func TestAdminParametersThatAreNotTextAre400(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{noWorker: true})
	for _, path := range []string{
		"/v1/suppressions/jane%00@example.com",
		"/v1/suppressions/jane%FF@example.com",
		"/v1/messages/postscale/msg%00",
		"/v1/messages/postscale/msg%C3%28",
		"/v1/suppressions/check?address=jane%00@example.com&scope=global",
		"/v1/suppressions/check?address=jane%FF@example.com&scope=global",
		"/v1/suppressions?scope=%00",
		"/v1/quarantine?provider=post%FFscale",
	} {
		code, resp := h.admin(http.MethodGet, path, "")
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(resp["reason"]), "parameter") {
			t.Errorf("GET %s: %d %v, want 400 naming the parameter", path, code, resp)
		}
	}
	// The same addresses as text are answered as usual.
	if code, resp := h.admin(http.MethodGet, "/v1/suppressions/check?address=jane@example.com&scope=global", ""); code != http.StatusOK || resp["suppressed"] != false {
		t.Fatalf("a valid check: %d %v", code, resp)
	}
}

// stalledUpload sends a kilobyte of an unsigned body of size bytes, stalls until release is
// closed, then sends the rest (answered 401 once read).
func stalledUpload(size int, release <-chan struct{}) func(w io.Writer) {
	return func(w io.Writer) {
		if _, err := w.Write(bytes.Repeat([]byte("x"), 1024)); err != nil {
			return
		}
		<-release
		_, _ = w.Write(bytes.Repeat([]byte("x"), size-1024))
	}
}

// Bodies are read before they can be authenticated. The bytes being read at once are bounded, in
// all and per client address: a client holding its share with slow unsigned uploads gets the next
// ones refused at once (503, Retry-After, not a byte of their bodies read), while a provider at
// another address is still accepted; once the uploads end, the client is read again.
func TestSlowUnsignedBodiesAreBoundedPerClient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.svc.Config.HTTP.MaxReadingBytes = 8 << 20
	h.svc.Config.HTTP.MaxReadingBytesPerClient = 2 << 20 // two bodies of max_body_bytes (1 MiB)
	// The uploads stall until the test lets them finish, not until a read timeout ends them.
	hs := newHostileServer(t, h, time.Minute)
	attacker := net.IPv4(127, 0, 0, 2)
	size := int(hs.cfg.HTTP.MaxBodyBytes)
	head := func(name string, more ...string) string {
		return rawHead("/webhooks/postscale", append([]string{hostileCaseHeader + ": " + name, "Content-Length: " + strconv.Itoa(size)}, more...)...)
	}
	// The uploads read to their end ask to close after the answer, so that reading it to EOF
	// does not wait out a kept-alive connection; the refused ones must be closed by the server.
	const closing = "Connection: close"
	release := make(chan struct{})
	upload := stalledUpload(size, release)
	var wg sync.WaitGroup
	held := make([]hostileResult, 2)
	for i := range held {
		name := "held-" + strconv.Itoa(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			held[i] = hs.rawFrom(t, attacker, head(name, closing), upload)
		}()
		waitUntil(t, name+"'s body being read", func() bool { return hs.bodyRead(name) > 0 })
	}
	for i := range 4 {
		name := "refused-" + strconv.Itoa(i)
		r := hs.rawFrom(t, attacker, head(name), upload)
		if r.code != http.StatusServiceUnavailable || !strings.Contains(r.reason, "too many request bodies") || !r.closed {
			t.Errorf("%s beyond the client's share: %d %q closed=%v, want 503 and the connection closed", name, r.code, r.reason, r.closed)
		}
		if n := hs.bodyRead(name); n != 0 {
			t.Errorf("%s: %d bytes of its body read before the refusal", name, n)
		}
	}
	// A provider elsewhere is unaffected while the two uploads stall.
	body := []byte(h.envelope(h.id("evt_during_slow"), "email.delivered", h.id("msg_during_slow"), time.Now(), ""))
	if r := hs.post(t, "", body, hostileSig(body, time.Now())); r.code != http.StatusOK {
		t.Fatalf("a signed webhook while one client holds its share: %d %q", r.code, r.reason)
	}
	close(release)
	wg.Wait()
	for i, r := range held {
		if r.code != http.StatusUnauthorized {
			t.Errorf("held-%d: %d %q, want 401 once its unsigned body was read", i, r.code, r.reason)
		}
	}
	if got := h.scrape(`mailhook_webhook_requests_total{endpoint="postscale",outcome="busy",provider="postscale"}`); got != 4 {
		t.Errorf("busy refusals counted %v, want 4", got)
	}
	// Given back: the same client is read again.
	if r := hs.rawFrom(t, attacker, head("after", closing), func(w io.Writer) { _, _ = w.Write(bytes.Repeat([]byte("x"), size)) }); r.code != http.StatusUnauthorized {
		t.Fatalf("the client once its uploads ended: %d %q, want its body read (401 unsigned)", r.code, r.reason)
	}
}

// Many clients together can fill the total with stalled unsigned uploads. A provider's webhook
// is then still accepted: once the oldest upload has been reading for CutAfter, the newcomer
// cuts it (503, connection closed) and takes its room, and the other upload goes on untouched.
func TestStalledUploadsFromManyClientsAreCutForAProvider(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.svc.Config.HTTP.MaxReadingBytes = 2 << 20          // two bodies of max_body_bytes (1 MiB)
	h.svc.Config.HTTP.MaxReadingBytesPerClient = 1 << 20 // one each
	hs := newHostileServer(t, h, time.Minute)
	size := int(hs.cfg.HTTP.MaxBodyBytes)
	release := make(chan struct{})
	upload := stalledUpload(size, release)
	var wg sync.WaitGroup
	held := make([]hostileResult, 2)
	for i := range held {
		name := "stalled-" + strconv.Itoa(i)
		headers := []string{hostileCaseHeader + ": " + name, "Content-Length: " + strconv.Itoa(size)}
		if i == 1 { // read to its end: asks to close after the answer (stalled-0 must be closed by the cut)
			headers = append(headers, "Connection: close")
		}
		head := rawHead("/webhooks/postscale", headers...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			held[i] = hs.rawFrom(t, net.IPv4(127, 0, 0, byte(2+i)), head, upload)
		}()
		waitUntil(t, name+"'s body being read", func() bool { return hs.bodyRead(name) > 0 })
	}

	// Until the uploads are old enough to cut, the provider is refused as busy; then accepted.
	body := []byte(h.envelope(h.id("evt_cut_for"), "email.delivered", h.id("msg_cut_for"), time.Now(), ""))
	var r hostileResult
	waitUntil(t, "the provider's webhook accepted while the total is held", func() bool {
		r = hs.post(t, "", body, hostileSig(body, time.Now()))
		if r.code != http.StatusOK && (r.code != http.StatusServiceUnavailable || !strings.Contains(r.reason, "too many request bodies")) {
			t.Fatalf("the provider while stalled uploads hold the total: %d %q, want 503 busy or 200", r.code, r.reason)
		}
		return r.code == http.StatusOK
	})
	h.waitProcessed(h.id("evt_cut_for"))
	close(release)
	wg.Wait()
	// stalled-0 is the oldest: cut for the provider. stalled-1 was read to its end: 401.
	if r := held[0]; r.code != http.StatusServiceUnavailable || !strings.Contains(r.reason, "cut to make room") || !r.closed {
		t.Errorf("the oldest stalled upload: %d %q closed=%v, want 503 cut and the connection closed", r.code, r.reason, r.closed)
	}
	if r := held[1]; r.code != http.StatusUnauthorized {
		t.Errorf("the other stalled upload: %d %q, want its body read to the end (401 unsigned)", r.code, r.reason)
	}
}
