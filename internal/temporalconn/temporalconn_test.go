package temporalconn_test

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/converter"

	"github.com/mailhook/mailhook/internal/codec"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/temporalconn"
	"github.com/mailhook/mailhook/internal/temporalconn/tlstest"
)

func TestPlainOptions(t *testing.T) {
	cfg := config.Defaults().Temporal
	opts, err := temporalconn.ClientOptions(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != cfg.Address || opts.Namespace != cfg.Namespace {
		t.Fatalf("options: %+v", opts)
	}
	if opts.ConnectionOptions.TLS != nil || opts.Credentials != nil || opts.DataConverter != nil || opts.FailureConverter != nil {
		t.Fatalf("TLS, credentials or a converter set without config: %+v", opts)
	}
}

func TestMTLSOptionsHandshake(t *testing.T) {
	f := tlstest.Write(t, t.TempDir(), "temporal.test")
	cfg := config.Defaults().Temporal
	cfg.TLS = config.TLS{Enabled: true, CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey, ServerName: f.ServerName}
	whole := config.Defaults()
	whole.Temporal = cfg
	if err := whole.Validate(); err != nil {
		t.Fatal(err)
	}
	opts, err := temporalconn.ClientOptions(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc := opts.ConnectionOptions.TLS
	if tc == nil || len(tc.Certificates) != 1 || tc.RootCAs == nil || tc.ServerName != "temporal.test" {
		t.Fatalf("tls config: %+v", tc)
	}

	// A server that demands a client certificate from the CA accepts this config (the server
	// name is verified against the certificate's, not the dialled IP)...
	ln, err := tls.Listen("tcp", "127.0.0.1:0", f.ServerConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan error, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			err = c.(*tls.Conn).Handshake()
			if err == nil {
				_, err = c.Write([]byte("ok"))
			}
			peer <- err
			_ = c.Close()
		}
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), tc.Clone())
	if err != nil {
		t.Fatalf("mTLS handshake: %v", err)
	}
	got, _ := io.ReadAll(conn)
	_ = conn.Close()
	if err := <-peer; err != nil || string(got) != "ok" {
		t.Fatalf("server side: %v, read %q", err, got)
	}
	if n := len(conn.ConnectionState().PeerCertificates); n == 0 {
		t.Fatal("no server certificate")
	}

	// ...and refuses a client without the certificate.
	noCert := tc.Clone()
	noCert.Certificates = nil
	if c, err := tls.Dial("tcp", ln.Addr().String(), noCert); err == nil {
		_, err = io.ReadAll(c)
		_ = c.Close()
		if err == nil {
			t.Fatal("server accepted a client without a certificate")
		}
	}
	<-peer
	// A wrong server name fails verification on the client.
	wrong := tc.Clone()
	wrong.ServerName = "other.test"
	if c, err := tls.Dial("tcp", ln.Addr().String(), wrong); err == nil {
		_ = c.Close()
		t.Fatal("certificate for temporal.test accepted as other.test")
	}
}

func TestTLSRefusesMissingOrBadFiles(t *testing.T) {
	dir := t.TempDir()
	f := tlstest.Write(t, dir, "temporal.test")
	notPEM := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(notPEM, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for name, tc := range map[string]struct {
		tls  config.TLS
		want string
	}{
		"missing cert":   {config.TLS{Enabled: true, CertFile: missing, KeyFile: f.ClientKey}, "missing.pem"},
		"missing key":    {config.TLS{Enabled: true, CertFile: f.ClientCert, KeyFile: missing}, "missing.pem"},
		"missing ca":     {config.TLS{Enabled: true, CAFile: missing}, "temporal.tls.ca_file"},
		"ca not PEM":     {config.TLS{Enabled: true, CAFile: notPEM}, "no PEM certificate"},
		"key mismatch":   {config.TLS{Enabled: true, CertFile: f.ClientCert, KeyFile: f.ServerKey}, "client certificate"},
		"cert, no key":   {config.TLS{Enabled: true, CertFile: f.ClientCert}, "together"},
		"cert not a PEM": {config.TLS{Enabled: true, CertFile: notPEM, KeyFile: f.ClientKey}, "client certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config.Defaults().Temporal
			cfg.TLS = tc.tls
			_, err := temporalconn.ClientOptions(cfg, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	// Config validation stops the missing files first, at load.
	cfg := config.Defaults()
	cfg.Temporal.TLS = config.TLS{Enabled: true, CertFile: missing, KeyFile: f.ClientKey}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "temporal.tls.cert_file") || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("validate: %v", err)
	}
}

func TestAPIKeyOptions(t *testing.T) {
	cfg := config.Defaults().Temporal
	cfg.Address, cfg.Namespace, cfg.APIKey = "us-east-1.aws.api.temporal.io:7233", "ns.acct", "test-api-key"
	opts, err := temporalconn.ClientOptions(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Credentials == nil {
		t.Fatal("no credentials for temporal.api_key")
	}
	// The SDK turns TLS on for API-key credentials when it is not configured; with temporal.tls
	// the configured TLS is used as it is.
	f := tlstest.Write(t, t.TempDir(), "temporal.test")
	cfg.TLS = config.TLS{Enabled: true, CAFile: f.CA}
	opts, err = temporalconn.ClientOptions(cfg, nil, nil)
	if err != nil || opts.Credentials == nil || opts.ConnectionOptions.TLS == nil || opts.ConnectionOptions.TLS.RootCAs == nil {
		t.Fatalf("api key with a CA: %+v, %v", opts.ConnectionOptions, err)
	}
}

func TestCodecOptionsEncrypt(t *testing.T) {
	cfg := config.Defaults().Temporal
	cfg.Codec = config.Codec{
		Keys: []config.CodecKey{
			{ID: "2026-11", Key: base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))},
			{ID: "2027-05", Key: base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))},
		},
		EncryptWith: "2027-05",
	}
	opts, err := temporalconn.ClientOptions(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.DataConverter == nil || opts.FailureConverter == nil {
		t.Fatal("codec configured but no data or failure converter")
	}
	p, err := opts.DataConverter.ToPayload(map[string]string{"recipient": "jane@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Metadata[converter.MetadataEncoding]) != codec.EncodingEncrypted || string(p.Metadata[codec.MetadataKeyID]) != "2027-05" || bytes.Contains(p.Data, []byte("jane")) {
		t.Fatalf("payload not encrypted with 2027-05: %v", p)
	}
	// Failure messages are encrypted too (an error may name an address).
	f := opts.FailureConverter.ErrorToFailure(errors.New("suppress jane@example.com: boom"))
	raw, _ := f.Marshal()
	if bytes.Contains(raw, []byte("jane@example.com")) || f.GetEncodedAttributes() == nil {
		t.Fatalf("failure message in plaintext: %v", f)
	}
	if back := opts.FailureConverter.FailureToError(f); !strings.Contains(back.Error(), "jane@example.com") {
		t.Fatalf("failure does not decode back: %v", back)
	}
}
