package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"
)

type clientIPKey struct{}

// ClientIP is the client address of a request the admin routes handed on (the console): the
// peer's, or what X-Forwarded-For says when the peer is one of TrustedProxies, as gin reads it
// for the webhooks' allow-lists. "" when the request did not come through them.
func ClientIP(ctx context.Context) string {
	ip, _ := ctx.Value(clientIPKey{}).(string)
	return ip
}

// withClientIP serves h with the client address in the request's context (ClientIP).
func withClientIP(h http.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		h.ServeHTTP(c.Writer, c.Request.WithContext(context.WithValue(c.Request.Context(), clientIPKey{}, c.ClientIP())))
	}
}
