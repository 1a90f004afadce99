package config

import (
	"strings"
	"testing"
)

func TestTelemetryEndpointValidation(t *testing.T) {
	for _, c := range []struct {
		endpoint string
		wantErr  string // "" = valid
	}{
		{"", ""},
		{"http://otel-collector:4317", ""},
		{"https://otlp.example.com:4317/", ""},
		{"otel-collector:4317", "not an http(s) URL"},
		{"grpc://otel-collector:4317", "not an http(s) URL"},
		{"http://otel-collector:4318/v1/traces", "has a path"},
		{"http://user:pass@otel-collector:4317", "no user or query"},
		{"http://otel-collector:4317?token=x", "no user or query"},
	} {
		err := Telemetry{OTLPEndpoint: c.endpoint}.validate()
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%q: %v", c.endpoint, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%q: error %v, want one saying %q", c.endpoint, err, c.wantErr)
		case err != nil && strings.Contains(err.Error(), "pass"):
			t.Errorf("%q: the error quotes the credentials: %v", c.endpoint, err)
		}
	}
	cfg := Defaults()
	cfg.Telemetry.OTLPEndpoint = "collector:4317"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "telemetry.otlp_endpoint") {
		t.Errorf("Validate: %v, want telemetry.otlp_endpoint named", err)
	}
}
