package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

// The mapping: every kind has a status, a stable `error` the document lists, and a default
// reason; only what a retry may fix is a 5xx or 408.
func TestErrorMappingTable(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Error struct {
							Enum []string `json:"enum"`
						} `json:"error"`
					} `json:"properties"`
				} `json:"Error"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	documented := doc.Components.Schemas.Error.Properties.Error.Enum
	want := map[kind]int{
		kindBadRequest: 400, kindBadPayload: 400, kindBadControl: 400, kindUnauthenticated: 401, kindInvalidSignature: 401,
		kindForbidden: 403, kindMissingScope: 403, kindNotFound: 404, kindTimeout: 408, kindConflict: 409, kindNotConfigured: 409, kindTooLarge: 413, kindTooManyEvents: 413,
		kindInternal: 500, kindUnavailable: 503,
	}
	var codes []string
	for k := range numKinds {
		a := answers[k]
		if a.status != want[k] || a.code == "" || a.reason == "" {
			t.Errorf("kind %d: %+v, want status %d, an error and a reason", k, a, want[k])
		}
		if slices.Contains(codes, a.code) {
			t.Errorf("kind %d: error %q repeats another kind's", k, a.code)
		}
		codes = append(codes, a.code)
		if !slices.Contains(documented, a.code) {
			t.Errorf("kind %d: error %q is not in the OpenAPI Error enum %q", k, a.code, documented)
		}
	}
	if len(documented) != len(codes) {
		t.Errorf("OpenAPI Error enum %q, the mapping's %q", documented, codes)
	}
}

// fail writes the mapped status and the one body, with the headers its kind needs.
func TestFailWritesTheMappedAnswer(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	s := &Server{RetryAfter: 9 * time.Second}
	cases := []struct {
		err                    *apiError
		status                 int
		body, header, hdrValue string
	}{
		{refuse(kindUnavailable, ""), 503, `{"error":"temporarily unavailable, retry later","reason":"a dependency is unavailable; retry after Retry-After seconds"}`, "Retry-After", "9"},
		{refuse(kindUnauthenticated, ""), 401, `{"error":"missing or invalid bearer token","reason":"send Authorization: Bearer with a token of admin.tokens"}`, "WWW-Authenticate", `Bearer realm="mailhook"`},
		{refuse(kindNotFound, "message not found"), 404, `{"error":"not found","reason":"message not found"}`, "", ""},
		{&apiError{kind: kindBadRequest, reason: `unknown reason "x"`, known: []string{"a", "b"}}, 400, `{"error":"bad request","reason":"unknown reason \"x\"","known":["a","b"]}`, "", ""},
		{&apiError{kind: kindTooManyEvents, reason: "4 events", limit: 3}, 413, `{"error":"too many events in one request","reason":"4 events","limit":3}`, "", ""},
		{&apiError{kind: kindInvalidSignature, reason: "missing signature", status: 406}, 406, `{"error":"invalid signature","reason":"missing signature"}`, "", ""},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		ctx, _ := gin.CreateTestContext(rec)
		if got := s.fail(ctx, c.err); got != c.status || rec.Code != c.status {
			t.Errorf("%v: returned %d, wrote %d, want %d", c.err, got, rec.Code, c.status)
		}
		if got := strings.TrimSpace(rec.Body.String()); got != c.body {
			t.Errorf("%v: body %s, want %s", c.err, got, c.body)
		}
		if c.header != "" && rec.Header().Get(c.header) != c.hdrValue {
			t.Errorf("%v: %s %q, want %q", c.err, c.header, rec.Header().Get(c.header), c.hdrValue)
		}
		if c.err.kind != kindUnavailable && rec.Header().Get("Retry-After") != "" {
			t.Errorf("%v: Retry-After on a %d", c.err, c.status)
		}
		if !ctx.IsAborted() {
			t.Errorf("%v: the handler chain goes on", c.err)
		}
	}
}

// A handler that panics answers 500 with the one body, not gin's empty one.
func TestPanicAnswersTheErrorBody(t *testing.T) {
	s := &Server{AdminTokens: map[string]string{"t": "ops"}}
	req := httptest.NewRequest(http.MethodGet, "/v1/messages/p/m", nil)
	req.Header.Set("Authorization", "Bearer t")
	rec := httptest.NewRecorder()
	w := gin.DefaultErrorWriter
	gin.DefaultErrorWriter = discard{} // the stack gin logs
	t.Cleanup(func() { gin.DefaultErrorWriter = w })
	s.Handler().ServeHTTP(rec, req) // Messages is nil: the handler panics
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), `"error":"internal error"`) {
		t.Errorf("panic: %d %s", rec.Code, rec.Body)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
