package httpapi

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"go.temporal.io/sdk/converter"

	"github.com/mailhook/mailhook/internal/codec"
	"github.com/mailhook/mailhook/internal/domain"
)

// CodecEndpoint serves Temporal's remote codec protocol (POST <base>/encode and <base>/decode,
// a JSON-encoded Payloads in and out) so the Temporal UI and `temporal --codec-endpoint` can show
// the payloads mailhook encrypts. Both need an admin bearer token: decoding reveals personal data.
type CodecEndpoint struct {
	Codec converter.PayloadCodec
	// CORSOrigins are the browser origins (the Temporal UI's) allowed to call it.
	CORSOrigins []string
}

// NewCodecEndpoint returns the endpoint for c, or nil (nothing mounted) when c is nil.
func NewCodecEndpoint(c *codec.Codec, corsOrigins []string) *CodecEndpoint {
	if c == nil {
		return nil
	}
	return &CodecEndpoint{Codec: c, CORSOrigins: corsOrigins}
}

// CodecPath is where the codec endpoint is mounted: the URL the UI and CLI are given.
const CodecPath = "/codec"

// maxCodecBody bounds one encode or decode request. Temporal refuses payloads over 2 MiB; one
// request can carry several (a workflow's input and result, an event's details).
const maxCodecBody = 16 << 20

// codecAllowHeaders are the request headers the Temporal UI sends (X-Namespace always,
// Authorization when "pass access token" is on).
const codecAllowHeaders = "Authorization, Content-Type, X-Namespace"

// mountCodec adds the codec routes when a codec is configured.
func (s *Server) mountCodec(r *gin.Engine) {
	if s.Codec == nil || s.Codec.Codec == nil {
		return
	}
	allowed := make(map[string]bool, len(s.Codec.CORSOrigins))
	for _, o := range s.Codec.CORSOrigins {
		allowed[normalizeOrigin(o)] = true
	}
	h := converter.NewPayloadCodecHTTPHandler(s.Codec.Codec)
	g := r.Group(CodecPath, s.codecCORS(allowed))
	for _, op := range []string{"/encode", "/decode"} {
		g.OPTIONS(op, codecPreflight)
		g.POST(op, s.requireToken, s.need(domain.ScopeCodec), func(c *gin.Context) {
			c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxCodecBody)
			// Who read what: decoding shows addresses and mail bodies.
			s.Log.InfoContext(c.Request.Context(), "codec", "op", strings.TrimPrefix(op, "/"), "actor", c.GetString(actorKey),
				"namespace", c.GetHeader("X-Namespace"), "origin", c.GetHeader("Origin"), "bytes", c.Request.ContentLength)
			h.ServeHTTP(c.Writer, c.Request)
		})
	}
}

// codecCORS answers the CORS headers of an allowed Origin on every codec response (401 too, so
// the UI can tell a missing token from a network error). A request from another origin gets no
// CORS headers, so the browser does not let the page read the answer; a preflight from it is
// refused outright.
func (s *Server) codecCORS(allowed map[string]bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		origin := c.GetHeader("Origin")
		c.Header("Vary", "Origin")
		if origin == "" {
			c.Next() // not a browser cross-origin request (CLI, curl)
			return
		}
		if !allowed[normalizeOrigin(origin)] {
			if c.Request.Method == http.MethodOptions {
				s.fail(c, refuse(kindForbidden, ""))
				return
			}
			c.Next()
			return
		}
		c.Header("Access-Control-Allow-Origin", origin)
		// The UI's "include cross-origin credentials" option sends fetch(credentials: include).
		c.Header("Access-Control-Allow-Credentials", "true")
		c.Next()
	}
}

// codecPreflight answers an allowed origin's OPTIONS (codecCORS refused the others).
func codecPreflight(c *gin.Context) {
	c.Header("Access-Control-Allow-Methods", "POST, OPTIONS")
	c.Header("Access-Control-Allow-Headers", codecAllowHeaders)
	c.Header("Access-Control-Max-Age", "600")
	c.Status(http.StatusNoContent)
}

// normalizeOrigin compares origins as browsers send them: lower-case, no trailing slash.
func normalizeOrigin(o string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(o), "/"))
}
