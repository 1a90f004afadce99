// Package temporalconn turns mailhook's temporal config into Temporal client options: address
// and namespace, TLS (mTLS client certificates, a private CA), an API key (Temporal Cloud), and
// the payload-encrypting data converter when temporal.codec is configured.
package temporalconn

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/mailhook/mailhook/internal/codec"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/telemetry"
)

// ClientOptions builds the options every mailhook process (HTTP server and worker) connects
// with. logger and metricsHandler may be nil (the SDK's defaults).
func ClientOptions(cfg config.Temporal, logger sdklog.Logger, metricsHandler client.MetricsHandler) (client.Options, error) {
	opts := client.Options{
		HostPort:       cfg.Address,
		Namespace:      cfg.Namespace,
		Logger:         logger,
		MetricsHandler: metricsHandler,
	}
	opts.ConnectionOptions.GrpcCompression = GrpcCompression(cfg.GrpcCompression)
	if cfg.TLS.Enabled {
		tc, err := TLSConfig(cfg.TLS)
		if err != nil {
			return client.Options{}, err
		}
		opts.ConnectionOptions.TLS = tc
	}
	if cfg.APIKey != "" {
		// Sent as "authorization: Bearer <key>" on every call; the SDK turns TLS on with the
		// system roots when temporal.tls is not enabled, so the key never travels in plaintext.
		opts.Credentials = client.NewAPIKeyStaticCredentials(cfg.APIKey)
	}
	// Tracing (internal/telemetry), when on: the worker built on the client inherits it.
	tracing, err := telemetry.TemporalInterceptors()
	if err != nil {
		return client.Options{}, err
	}
	opts.Interceptors = tracing
	c, err := Codec(cfg)
	if err != nil {
		return client.Options{}, err
	}
	if c != nil {
		dc := c.DataConverter()
		opts.DataConverter = dc
		// Failures too: their details go through the codec, and their messages and stack traces
		// are moved into an encrypted payload (an error can name an address, e.g. "suppress
		// user@example.com: …"). The UI and CLI show them through the codec endpoint.
		opts.FailureConverter = temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
			DataConverter: dc, EncodeCommonAttributes: true,
		})
	}
	return opts, nil
}

// GrpcCompression maps temporal.grpc_compression to the SDK's option: gzip only when asked
// for (the SDK's default is gzip; config.Temporal.GrpcCompression says why mailhook's is not).
func GrpcCompression(name string) client.GrpcCompression {
	if name == config.GrpcCompressionGzip {
		return &client.GrpcCompressionGzip{}
	}
	return &client.GrpcCompressionNone{}
}

// Codec builds the payload codec from temporal.codec; nil when it is not configured.
func Codec(cfg config.Temporal) (*codec.Codec, error) {
	if !cfg.Codec.Enabled() {
		return nil, nil
	}
	keys := make([]codec.Key, 0, len(cfg.Codec.Keys))
	for i, k := range cfg.Codec.Keys {
		b, err := k.Bytes()
		if err != nil {
			return nil, fmt.Errorf("temporal.codec.keys[%d].key (id %q): %w", i, k.ID, err)
		}
		keys = append(keys, codec.Key{ID: k.ID, Secret: b})
	}
	c, err := codec.New(keys, cfg.Codec.EncryptWith)
	if err != nil {
		return nil, fmt.Errorf("temporal.codec: %w", err)
	}
	return c, nil
}

// TLSConfig builds the client TLS config from temporal.tls: the client certificate (mTLS),
// the CAs that verify the server (system roots when ca_file is empty) and the server name.
func TLSConfig(t config.TLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, fmt.Errorf("temporal.tls: cert_file and key_file must be set together")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("temporal.tls: client certificate %s / key %s: %w", t.CertFile, t.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("temporal.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("temporal.tls.ca_file %s: no PEM certificate in it", t.CAFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}
