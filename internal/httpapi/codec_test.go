package httpapi_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/mailhook/mailhook/internal/codec"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/httpapi"
)

const (
	codecToken = "codec-test-admin-token"
	uiOrigin   = "http://127.0.0.1:8233"
)

func codecServer(t *testing.T) (*httptest.Server, *codec.Codec) {
	t.Helper()
	k := make([]byte, codec.KeySize)
	_, _ = rand.Read(k)
	c, err := codec.New([]codec.Key{{ID: "k1", Secret: k}}, "k1")
	if err != nil {
		t.Fatal(err)
	}
	s := &httpapi.Server{
		AdminTokens: map[string]string{codecToken: "ops", checkOnlyToken: "sender"},
		TokenScopes: map[string][]string{checkOnlyToken: {domain.ScopeSuppressionsCheck}},
		Codec:       httpapi.NewCodecEndpoint(c, []string{uiOrigin + "/"}),
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, c
}

func send(t *testing.T, method, url string, header map[string]string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

func payloadsJSON(t *testing.T, ps ...*commonpb.Payload) []byte {
	t.Helper()
	b, err := json.Marshal(&commonpb.Payloads{Payloads: ps})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCodecEndpointDecodesWithToken(t *testing.T) {
	srv, c := codecServer(t)
	plain, _ := converter.GetDefaultDataConverter().ToPayload(map[string]string{"recipient": "jane@example.com"})
	enc, err := c.Encode([]*commonpb.Payload{plain})
	if err != nil {
		t.Fatal(err)
	}
	body := payloadsJSON(t, enc...)

	resp, raw := send(t, http.MethodPost, srv.URL+"/codec/decode", map[string]string{"Content-Type": "application/json", "X-Namespace": "default"}, body)
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(raw), "jane") {
		t.Fatalf("no token: %d %s", resp.StatusCode, raw)
	}
	resp, raw = send(t, http.MethodPost, srv.URL+"/codec/decode", map[string]string{"Authorization": "Bearer wrong-token-000000"}, body)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d %s", resp.StatusCode, raw)
	}
	resp, raw = send(t, http.MethodPost, srv.URL+"/codec/decode", map[string]string{"Authorization": "Bearer " + codecToken, "X-Namespace": "default"}, body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("decode: %d %s", resp.StatusCode, raw)
	}
	var out commonpb.Payloads
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Payloads) != 1 || !out.Payloads[0].Equal(plain) {
		t.Fatalf("decoded %s (%v)", raw, err)
	}

	// The SDK's own remote codec client (what `temporal --codec-endpoint` speaks) round-trips.
	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{
		Endpoint: srv.URL + "/codec",
		ModifyRequest: func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+codecToken)
			return nil
		},
	})
	renc, err := remote.Encode([]*commonpb.Payload{plain})
	if err != nil || string(renc[0].Metadata[codec.MetadataKeyID]) != "k1" || bytes.Contains(renc[0].Data, []byte("jane")) {
		t.Fatalf("remote encode: %v %v", renc, err)
	}
	rdec, err := remote.Decode(renc)
	if err != nil || !rdec[0].Equal(plain) {
		t.Fatalf("remote decode: %v %v", rdec, err)
	}

	// A payload the codec cannot open is a 400 with the reason, not plaintext or a 500.
	bad := enc[0]
	bad.Data[len(bad.Data)-1] ^= 1
	resp, raw = send(t, http.MethodPost, srv.URL+"/codec/decode", map[string]string{"Authorization": "Bearer " + codecToken}, payloadsJSON(t, bad))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), "authentication failed") {
		t.Fatalf("tampered: %d %s", resp.StatusCode, raw)
	}
}

func TestCodecEndpointCORS(t *testing.T) {
	srv, _ := codecServer(t)
	preflight := map[string]string{
		"Origin":                         uiOrigin,
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "authorization,content-type,x-namespace",
	}
	for _, op := range []string{"decode", "encode"} {
		resp, raw := send(t, http.MethodOptions, srv.URL+"/codec/"+op, preflight, nil)
		h := resp.Header
		if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != uiOrigin ||
			h.Get("Access-Control-Allow-Credentials") != "true" || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
			t.Fatalf("preflight %s: %d %v %s", op, resp.StatusCode, h, raw)
		}
		for _, want := range []string{"Authorization", "Content-Type", "X-Namespace"} {
			if !strings.Contains(h.Get("Access-Control-Allow-Headers"), want) {
				t.Fatalf("preflight allows headers %q, not %s", h.Get("Access-Control-Allow-Headers"), want)
			}
		}
	}
	// Another origin: refused, and nothing tells the browser to let it read.
	preflight["Origin"] = "https://evil.example"
	resp, _ := send(t, http.MethodOptions, srv.URL+"/codec/decode", preflight, nil)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("foreign preflight: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = send(t, http.MethodPost, srv.URL+"/codec/decode", map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer " + codecToken}, payloadsJSON(t))
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("foreign origin got CORS headers: %v", resp.Header)
	}
	// The allowed origin sees a 401 (missing token) as a 401, not as a network error.
	resp, _ = send(t, http.MethodPost, srv.URL+"/codec/decode", map[string]string{"Origin": uiOrigin}, payloadsJSON(t))
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != uiOrigin {
		t.Fatalf("401 without CORS headers: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestNoCodecNoEndpoint(t *testing.T) {
	s := &httpapi.Server{AdminTokens: map[string]string{codecToken: "ops"}, Codec: httpapi.NewCodecEndpoint(nil, nil)}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, _ := send(t, http.MethodPost, srv.URL+"/codec/decode", map[string]string{"Authorization": "Bearer " + codecToken}, []byte(`{"payloads":[]}`))
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("codec endpoint without a codec: %d", resp.StatusCode)
	}
}

// checkOnlyToken holds suppressions:check alone: what a sending system's token needs, and not
// enough to decode payloads.
const checkOnlyToken = "codec-test-check-only-token"

func TestCodecNeedsTheCodecScope(t *testing.T) {
	srv, c := codecServer(t)
	p, err := c.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`{"a":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	resp, raw := send(t, http.MethodPost, srv.URL+"/codec/decode", map[string]string{"Authorization": "Bearer " + checkOnlyToken, "Content-Type": "application/json"}, payloadsJSON(t, p...))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(raw), `codec`) {
		t.Fatalf("decode with a check-only token: %d %s, want 403 naming the codec scope", resp.StatusCode, raw)
	}
	resp, raw = send(t, http.MethodPost, srv.URL+"/codec/decode", map[string]string{"Authorization": "Bearer " + codecToken, "Content-Type": "application/json"}, payloadsJSON(t, p...))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("decode with a token without scopes (every scope): %d %s", resp.StatusCode, raw)
	}
}
