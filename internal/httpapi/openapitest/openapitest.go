// Package openapitest holds the HTTP API to its OpenAPI document in tests: Validate wraps a
// handler and fails the test for every answer the document does not describe.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/mailhook/mailhook/internal/httpapi"
)

// Load parses and validates the server's OpenAPI document (httpapi.OpenAPIDocument) and builds
// its router. The result is shared: load it once per process.
func Load() (*openapi3.T, routers.Router, error) {
	loadOnce.Do(func() { loaded.doc, loaded.router, loaded.err = load() })
	return loaded.doc, loaded.router, loaded.err
}

var (
	loadOnce sync.Once
	loaded   struct {
		doc    *openapi3.T
		router routers.Router
		err    error
	}
)

func load() (*openapi3.T, routers.Router, error) {
	ctx := context.Background()
	loader := openapi3.NewLoader()
	loader.Context = ctx
	doc, err := loader.LoadFromData(httpapi.OpenAPIDocument())
	if err != nil {
		return nil, nil, fmt.Errorf("load: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, nil, fmt.Errorf("validate: %w", err)
	}
	// gorillamux routes on the escaped path: an id holding "%2F" stays one segment, as it does
	// in the server (the legacy router matches the unescaped path).
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("router: %w", err)
	}
	return doc, router, nil
}

// Covered reports whether Validate checks a request to path: the webhook endpoints, the health
// checks and everything under /v1. /metrics and /codec are other protocols (Prometheus', and
// Temporal's remote codec) and are not in the document.
func Covered(path string) bool {
	return path == "/v1" || strings.HasPrefix(path, "/v1/") ||
		path == "/webhooks" || strings.HasPrefix(path, "/webhooks/") ||
		path == "/healthz" || path == "/readyz"
}

// Validate wraps next so that every answer to a covered request (Covered) is checked against
// the OpenAPI document: its route and method are documented, its status is one the operation
// lists, its Content-Type is the documented one, its body matches the schema, its documented
// headers are there, and a route the document secures did not answer a request without a token
// with a success. Each mismatch is a t.Errorf naming the method, the path, the status and what
// is wrong. Requests are not validated: tests send malformed ones on purpose, and the answers are
// the contract.
//
// A request the document has no operation for must be one the server does not route either: it
// answers the document's NotRouted response (a JSON 404); a redirect (gin's trailing-slash one) is
// an error too. A route the server answers but the document lacks is an error.
func Validate(t testing.TB, next http.Handler) http.Handler {
	t.Helper()
	doc, router, err := Load()
	if err != nil {
		t.Fatalf("openapi document: %v", err)
	}
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true,
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Covered(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		method, target := r.Method, r.URL.RequestURI()
		hasToken := r.Header.Get("Authorization") != ""
		// Found before the handler runs: the route does not depend on the body.
		route, params, findErr := router.FindRoute(r)
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status, header, body := rec.result()

		if findErr != nil {
			if status != http.StatusNotFound {
				t.Errorf("openapi: %s %s answered %d, but the document has no such operation (%v): document the route in internal/httpapi/openapi.json; body: %s",
					method, target, status, findErr, excerpt(body))
				return
			}
			if err := notRouted(doc, header, body); err != nil {
				t.Errorf("openapi: %s %s answered 404, not the document's NotRouted response: %s\nbody: %s",
					method, target, brief(err), excerpt(body))
			}
			return
		}
		if secured(doc, route.Operation) && !hasToken && status < 400 {
			t.Errorf("openapi: %s %s answered %d without a bearer token, but the document says it needs one",
				method, target, status)
		}
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{
				Request: r, PathParams: params, Route: route, Options: opts,
			},
			Status:  status,
			Header:  header,
			Options: opts,
		}
		in.SetBodyBytes(body)
		if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
			t.Errorf("openapi: %s %s (operation %s) answered %d, not as documented: %s\nbody: %s",
				method, target, route.Operation.OperationID, status, brief(err), excerpt(body))
		}
	})
}

// secured reports whether the document requires a security scheme for op.
func secured(doc *openapi3.T, op *openapi3.Operation) bool {
	reqs := doc.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	for _, req := range reqs {
		if len(req) == 0 {
			return false // {} in the list: anonymous access allowed
		}
	}
	return len(reqs) > 0
}

// notRouted checks a 404 for a request no operation describes against the document's NotRouted
// response: its Content-Type and its body's schema.
func notRouted(doc *openapi3.T, header http.Header, body []byte) error {
	ref := doc.Components.Responses["NotRouted"]
	if ref == nil || ref.Value == nil {
		return errors.New("the document has no NotRouted response")
	}
	ct := header.Get("Content-Type")
	mt, _, _ := strings.Cut(ct, ";")
	media := ref.Value.Content.Get(strings.TrimSpace(mt))
	if media == nil || media.Schema == nil {
		return fmt.Errorf("Content-Type %q is not one NotRouted documents", ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	return media.Schema.Value.VisitJSON(v)
}

// brief is err without the schema it quotes (the body is shown next to it).
func brief(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\nSchema:"); i > 0 {
		msg = msg[:i]
	}
	return msg
}

func excerpt(b []byte) string {
	const max = 512
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// maxRecorded bounds the body kept for validation; every answer of the API is far smaller.
const maxRecorded = 8 << 20

// recorder passes the answer through and keeps its status, headers and body.
type recorder struct {
	http.ResponseWriter
	status int
	header http.Header
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
		r.header = r.ResponseWriter.Header().Clone()
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if room := maxRecorded - r.body.Len(); room > 0 {
		r.body.Write(p[:min(len(p), room)])
	}
	return r.ResponseWriter.Write(p)
}

// Flush and Unwrap keep http.Flusher and http.ResponseController working through the recorder.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) result() (int, http.Header, []byte) {
	if r.status == 0 {
		// The handler wrote nothing: net/http answers 200 with no body.
		return http.StatusOK, r.ResponseWriter.Header().Clone(), nil
	}
	return r.status, r.header, r.body.Bytes()
}
