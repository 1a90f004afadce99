package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// TLS configures the connection to a remote Temporal cluster (temporal.tls). Temporal Cloud
// with mTLS needs enabled, cert_file and key_file; a self-hosted cluster with a private CA also
// ca_file. Without ca_file the system roots verify the server.
type TLS struct {
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs that sign the server's certificate.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the PEM client certificate and key (mTLS); both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name the server certificate is verified against (when
	// temporal.address is an IP or a load balancer name).
	ServerName string `yaml:"server_name"`
}

// Codec configures payload encryption (temporal.codec). With keys set, every payload mailhook
// sends to Temporal is AES-256-GCM encrypted with the key encrypt_with names; payloads are
// decrypted with whichever key they name.
type Codec struct {
	Keys        []CodecKey `yaml:"keys"`
	EncryptWith string     `yaml:"encrypt_with"`
	// CORSOrigins are the browser origins (the Temporal UI's, e.g. http://127.0.0.1:8233)
	// allowed to call POST /codec/encode and /codec/decode.
	CORSOrigins []string `yaml:"cors_origins"`
}

// CodecKey is one named AES-256 key, base64 (standard or URL alphabet, padded or not).
type CodecKey struct {
	ID  string `yaml:"id"`
	Key string `yaml:"key"`
}

// Enabled reports whether payload encryption is configured.
func (c Codec) Enabled() bool { return len(c.Keys) > 0 }

// Bytes decodes the key.
func (k CodecKey) Bytes() ([]byte, error) {
	s := strings.TrimSpace(k.Key)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// codecKeySize is the AES-256 key length (codec.KeySize; config does not import the codec).
const codecKeySize = 32

var codecKeyID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// temporal.grpc_compression's values.
const (
	GrpcCompressionNone = "none"
	GrpcCompressionGzip = "gzip"
)

// validateRemote checks temporal.grpc_compression, temporal.tls, temporal.api_key and
// temporal.codec.
func (t Temporal) validateRemote() error {
	switch t.GrpcCompression {
	case GrpcCompressionNone, GrpcCompressionGzip, "": // empty: none (a chart's unset value)
	default:
		return fmt.Errorf("config: temporal.grpc_compression %q is not one of none, gzip", t.GrpcCompression)
	}
	if err := t.TLS.validate(); err != nil {
		return err
	}
	if t.APIKey != "" && strings.TrimSpace(t.APIKey) != t.APIKey {
		return errors.New("config: temporal.api_key has leading or trailing whitespace")
	}
	return t.Codec.validate()
}

func (t TLS) validate() error {
	files := []struct{ key, path string }{
		{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile},
	}
	if !t.Enabled {
		for _, f := range append(files, struct{ key, path string }{"server_name", t.ServerName}) {
			if f.path != "" {
				return fmt.Errorf("config: temporal.tls.%s is set but temporal.tls.enabled is false", f.key)
			}
		}
		return nil
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return errors.New("config: temporal.tls.cert_file and temporal.tls.key_file must be set together (mTLS client certificate and its key)")
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		st, err := os.Stat(f.path)
		if err != nil {
			return fmt.Errorf("config: temporal.tls.%s %q: %w", f.key, f.path, pathErr(err))
		}
		if st.IsDir() {
			return fmt.Errorf("config: temporal.tls.%s %q is a directory, not a PEM file", f.key, f.path)
		}
		fh, err := os.Open(f.path)
		if err != nil {
			return fmt.Errorf("config: temporal.tls.%s %q: %w", f.key, f.path, pathErr(err))
		}
		_ = fh.Close()
	}
	return nil
}

func (c Codec) validate() error {
	if !c.Enabled() {
		if c.EncryptWith != "" || len(c.CORSOrigins) > 0 {
			return errors.New("config: temporal.codec.keys is empty: encrypt_with and cors_origins need at least one key")
		}
		return nil
	}
	ids := map[string]bool{}
	for i, k := range c.Keys {
		key := fmt.Sprintf("temporal.codec.keys[%d]", i)
		if !codecKeyID.MatchString(k.ID) {
			return fmt.Errorf("config: %s.id %q must be 1-64 letters, digits, '.', '_', ':' or '-'", key, k.ID)
		}
		if ids[k.ID] {
			return fmt.Errorf("config: %s.id %q is used twice", key, k.ID)
		}
		ids[k.ID] = true
		if strings.TrimSpace(k.Key) == "" {
			return fmt.Errorf("config: %s.key (id %q) is empty (is its ${ENV} variable set?)", key, k.ID)
		}
		b, err := k.Bytes()
		if err != nil {
			return fmt.Errorf("config: %s.key (id %q) is not base64 (generate one with: openssl rand -base64 32)", key, k.ID)
		}
		if len(b) != codecKeySize {
			return fmt.Errorf("config: %s.key (id %q) decodes to %d bytes; AES-256 needs %d (generate one with: openssl rand -base64 32)", key, k.ID, len(b), codecKeySize)
		}
	}
	if c.EncryptWith == "" {
		return fmt.Errorf("config: temporal.codec.encrypt_with is empty: name the id of the key new payloads are encrypted with (one of %s)", strings.Join(keyIDs(c.Keys), ", "))
	}
	if !ids[c.EncryptWith] {
		return fmt.Errorf("config: temporal.codec.encrypt_with %q is not the id of any temporal.codec.keys (have %s)", c.EncryptWith, strings.Join(keyIDs(c.Keys), ", "))
	}
	for i, o := range c.CORSOrigins {
		if o == "*" {
			return fmt.Errorf("config: temporal.codec.cors_origins[%d]: \"*\" is not allowed: list the Temporal UI's origin", i)
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("config: temporal.codec.cors_origins[%d] %q is not an origin like https://temporal-ui.example.com or http://127.0.0.1:8233", i, o)
		}
	}
	return nil
}

func keyIDs(keys []CodecKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%q", k.ID)
	}
	return out
}

// pathErr is the cause of a file error without the path, which the message already names.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
