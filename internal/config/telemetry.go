package config

import (
	"fmt"
	"net/url"
)

// Telemetry configures OpenTelemetry tracing (internal/telemetry). Tracing is off unless
// otlp_endpoint or the standard OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// names a collector; the other OTEL_* variables (OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER,
// OTEL_EXPORTER_OTLP_HEADERS, …) then apply as the OpenTelemetry SDK defines them.
type Telemetry struct {
	// OTLPEndpoint is the collector's OTLP/gRPC address as a URL: http://host:4317 (plaintext)
	// or https://host:4317 (TLS). It takes precedence over OTEL_EXPORTER_OTLP_ENDPOINT.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
}

func (t Telemetry) validate() error {
	if t.OTLPEndpoint == "" {
		return nil
	}
	// The value is not quoted back: an endpoint URL may carry credentials.
	u, err := url.Parse(t.OTLPEndpoint)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("config: telemetry.otlp_endpoint is not an http(s) URL (want e.g. http://otel-collector:4317)")
	case u.Path != "" && u.Path != "/":
		return fmt.Errorf("config: telemetry.otlp_endpoint has a path (%s): mailhook exports OTLP over gRPC, which takes scheme://host:port only (a /v1/traces path is OTLP/HTTP's, usually on port 4318)", u.Path)
	case u.RawQuery != "" || u.User != nil:
		return fmt.Errorf("config: telemetry.otlp_endpoint must be scheme://host:port, with no user or query (headers go in OTEL_EXPORTER_OTLP_HEADERS)")
	}
	return nil
}
