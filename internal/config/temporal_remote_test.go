package config_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/config"
)

var (
	codecKeyA = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	codecKeyB = base64.RawURLEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
)

func TestCodecConfigLoads(t *testing.T) {
	t.Setenv("MAILHOOK_CODEC_KEY_2026_11", codecKeyA)
	t.Setenv("MAILHOOK_CODEC_KEY_2027_05", codecKeyB)
	cfg, err := config.Load(write(t, `
temporal:
  codec:
    keys:
      - {id: "2026-11", key: "${MAILHOOK_CODEC_KEY_2026_11}"}
      - {id: "2027-05", key: "${MAILHOOK_CODEC_KEY_2027_05}"}
    encrypt_with: "2027-05"
    cors_origins: ["http://127.0.0.1:8233", "https://temporal-ui.example.com/"]
`))
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Temporal.Codec
	if !c.Enabled() || c.EncryptWith != "2027-05" || len(c.Keys) != 2 || len(c.CORSOrigins) != 2 {
		t.Fatalf("codec: %+v", c)
	}
	for _, k := range c.Keys {
		if b, err := k.Bytes(); err != nil || len(b) != 32 {
			t.Fatalf("key %s: %d bytes, %v", k.ID, len(b), err)
		}
	}
	if d := config.Defaults(); d.Temporal.Codec.Enabled() || d.Temporal.TLS.Enabled || d.Temporal.APIKey != "" {
		t.Fatalf("encryption, TLS or an API key on by default: %+v", d.Temporal)
	}
}

func TestBadCodecConfigNamesTheKey(t *testing.T) {
	short := base64.StdEncoding.EncodeToString([]byte("only-16-bytes!!!"))
	tests := map[string]struct{ yaml, want string }{
		"not base64": {`temporal: {codec: {keys: [{id: k1, key: "not*base64"}], encrypt_with: k1}}`,
			`temporal.codec.keys[0].key (id "k1") is not base64`},
		"short key": {`temporal: {codec: {keys: [{id: k1, key: "` + codecKeyA + `"}, {id: k2, key: "` + short + `"}], encrypt_with: k1}}`,
			`temporal.codec.keys[1].key (id "k2") decodes to 16 bytes; AES-256 needs 32`},
		"empty key": {`temporal: {codec: {keys: [{id: k1, key: ""}], encrypt_with: k1}}`,
			`temporal.codec.keys[0].key (id "k1") is empty`},
		"unset key env": {`temporal: {codec: {keys: [{id: k1, key: "${MAILHOOK_TEST_CODEC_UNSET}"}], encrypt_with: k1}}`,
			"MAILHOOK_TEST_CODEC_UNSET"},
		"empty id": {`temporal: {codec: {keys: [{id: "", key: "` + codecKeyA + `"}], encrypt_with: k1}}`,
			"temporal.codec.keys[0].id"},
		"id with space": {`temporal: {codec: {keys: [{id: "a b", key: "` + codecKeyA + `"}], encrypt_with: "a b"}}`,
			"temporal.codec.keys[0].id"},
		"duplicate id": {`temporal: {codec: {keys: [{id: k1, key: "` + codecKeyA + `"}, {id: k1, key: "` + codecKeyB + `"}], encrypt_with: k1}}`,
			`temporal.codec.keys[1].id "k1" is used twice`},
		"no encrypt_with": {`temporal: {codec: {keys: [{id: k1, key: "` + codecKeyA + `"}]}}`,
			`temporal.codec.encrypt_with is empty`},
		"unknown encrypt_with": {`temporal: {codec: {keys: [{id: k1, key: "` + codecKeyA + `"}], encrypt_with: k2}}`,
			`temporal.codec.encrypt_with "k2" is not the id`},
		"encrypt_with without keys": {`temporal: {codec: {encrypt_with: k1}}`, "temporal.codec.keys is empty"},
		"wildcard origin": {`temporal: {codec: {keys: [{id: k1, key: "` + codecKeyA + `"}], encrypt_with: k1, cors_origins: ["*"]}}`,
			"temporal.codec.cors_origins[0]"},
		"origin with path": {`temporal: {codec: {keys: [{id: k1, key: "` + codecKeyA + `"}], encrypt_with: k1, cors_origins: ["http://ui:8080/namespaces"]}}`,
			"temporal.codec.cors_origins[0]"},
		"unknown codec key": {`temporal: {codec: {keys: [{id: k1, key: "` + codecKeyA + `"}], encrypt_with: k1, cors: [x]}}`, "cors"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(write(t, tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v; want one line containing %q", err, tc.want)
			}
			// A key's material never appears in an error.
			if err != nil && (strings.Contains(err.Error(), codecKeyA) || strings.Contains(err.Error(), codecKeyB)) {
				t.Fatalf("error shows the key: %v", err)
			}
		})
	}
}

func TestTLSConfigFilesMustExist(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key"), filepath.Join(dir, "ca.pem")
	for _, p := range []string{cert, key, ca} {
		if err := os.WriteFile(p, []byte("-----BEGIN PLACEHOLDER-----\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TEMPORAL_TEST_API_KEY", "eyJhbGciOi.test-api-key")
	ok := `
temporal:
  address: ns.acct.tmprl.cloud:7233
  namespace: ns.acct
  tls: {enabled: true, cert_file: ` + cert + `, key_file: ` + key + `, ca_file: ` + ca + `, server_name: ns.acct.tmprl.cloud}
  api_key: ${TEMPORAL_TEST_API_KEY}
`
	cfg, err := config.Load(write(t, ok))
	if err != nil {
		t.Fatal(err)
	}
	if tls := cfg.Temporal.TLS; !tls.Enabled || tls.CertFile != cert || tls.KeyFile != key || tls.CAFile != ca || tls.ServerName != "ns.acct.tmprl.cloud" || cfg.Temporal.APIKey != "eyJhbGciOi.test-api-key" {
		t.Fatalf("temporal: %+v", cfg.Temporal)
	}

	missing := filepath.Join(dir, "nope.pem")
	tests := map[string]struct{ yaml, want string }{
		"missing cert": {`temporal: {tls: {enabled: true, cert_file: ` + missing + `, key_file: ` + key + `}}`,
			`temporal.tls.cert_file "` + missing + `": no such file or directory`},
		"missing key": {`temporal: {tls: {enabled: true, cert_file: ` + cert + `, key_file: ` + missing + `}}`,
			`temporal.tls.key_file "` + missing + `"`},
		"missing ca": {`temporal: {tls: {enabled: true, ca_file: ` + missing + `}}`,
			`temporal.tls.ca_file "` + missing + `"`},
		"directory":     {`temporal: {tls: {enabled: true, ca_file: ` + dir + `}}`, "temporal.tls.ca_file"},
		"cert, no key":  {`temporal: {tls: {enabled: true, cert_file: ` + cert + `}}`, "temporal.tls.cert_file and temporal.tls.key_file"},
		"not enabled":   {`temporal: {tls: {cert_file: ` + cert + `, key_file: ` + key + `}}`, "temporal.tls.cert_file is set but temporal.tls.enabled is false"},
		"spaced apikey": {`temporal: {api_key: " key"}`, "temporal.api_key"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(write(t, tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v; want one line containing %q", err, tc.want)
			}
		})
	}
}
