package config_test

import (
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/config"
)

// Without a key erasure is not configured; MAILHOOK_ERASURE_KEY or erasure.hash_key configures
// it; a key that is not base64 of 32 bytes stops start-up naming the key, never quoting it.
func TestErasureHashKey(t *testing.T) {
	t.Setenv(config.EnvErasureKey, "")
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if h, err := cfg.Erasure.Hasher(); err != nil || h.Configured() {
		t.Fatalf("defaults: hasher configured %v, %v; want none", h.Configured(), err)
	}

	const key = "c2VjcmV0LWVyYXN1cmUta2V5LW9mLWF0LWxlYXN0LTMyLWJ5dGVz" // 36 bytes
	t.Setenv(config.EnvErasureKey, key)
	cfg, err = config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if h, err := cfg.Erasure.Hasher(); err != nil || !h.Configured() || cfg.UsesDevErasureKey() {
		t.Fatalf("%s: hasher configured %v, %v", config.EnvErasureKey, h.Configured(), err)
	}

	for _, bad := range []string{"short-key", "c2hvcnQ="} {
		_, err := config.Load(write(t, "erasure: {hash_key: \""+bad+"\"}\n"))
		if err == nil || !strings.Contains(err.Error(), "erasure.hash_key") || strings.Contains(err.Error(), bad) {
			t.Errorf("hash_key %q: %v; want an error naming erasure.hash_key without the key", bad, err)
		}
	}

	t.Setenv(config.EnvErasureKey, "")
	cfg, err = config.Load("../../deploy/mailhook.dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := cfg.Erasure.Hasher(); !h.Configured() || !cfg.UsesDevErasureKey() {
		t.Fatal("the dev config does not erase with the dev key")
	}
}
