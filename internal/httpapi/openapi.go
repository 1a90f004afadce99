package httpapi

import (
	"bytes"
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPIDocument is the OpenAPI 3.1 description of the webhook endpoints, the health checks and
// the /v1 API. Tests hold every answer of the server to it (internal/httpapi/openapitest), so a
// change to a route, a status or a body changes openapi.json with it.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIPath serves the document. It is public, like /healthz: it describes the API and holds
// no data, and tools (generators, API explorers) can read it without an admin token.
const OpenAPIPath = "/v1/openapi.json"

// OpenAPIDocument returns a copy of the OpenAPI document served at OpenAPIPath.
func OpenAPIDocument() []byte { return bytes.Clone(openAPIDocument) }

// serveOpenAPI answers GET /v1/openapi.json with the embedded document as it is.
func serveOpenAPI(c *gin.Context) {
	c.Data(http.StatusOK, "application/json", openAPIDocument)
}
