package providercounts_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/providercounts"
)

// New builds each provider's counter from its reconcile block, with the provider's address
// unless base_url overrides it; a block missing what its provider needs is refused by name.
func TestNewBuildsEachProviderFromSettings(t *testing.T) {
	mg, err := providercounts.New("mailgun", providercounts.Settings{APIKey: "key-mg", Domain: "mg.example.com", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := mg.(providercounts.Mailgun); !ok || m.BaseURL != "https://api.mailgun.net" || m.APIKey != "key-mg" || m.Domain != "mg.example.com" ||
		m.Client == nil || m.Client.Timeout != 5*time.Second {
		t.Errorf("mailgun: %#v", mg)
	}
	eu, _ := providercounts.New("mailgun", providercounts.Settings{APIKey: "k", Domain: "d", BaseURL: "https://api.eu.mailgun.net/"})
	if m, _ := eu.(providercounts.Mailgun); m.BaseURL != "https://api.eu.mailgun.net" {
		t.Errorf("mailgun EU: %#v", eu)
	}
	s, err := providercounts.New("ses", providercounts.Settings{Region: "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := s.(providercounts.SES); !ok || c.Region != "eu-west-1" || c.BaseURL != "" || c.Credentials != nil {
		t.Errorf("ses: %#v", s)
	}

	// The SES counter New builds speaks to base_url through the SDK.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(sesAnswer)) }))
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-env-key")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	s, err = providercounts.New("ses", providercounts.Settings{Region: "eu-west-1", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Day(context.Background(), time.Now().Add(-24*time.Hour)); err != nil {
		t.Errorf("ses through base_url with the environment's credentials: %v", err)
	}

	for _, c := range []struct {
		provider, field string
		s               providercounts.Settings
	}{
		{"mailgun", "api_key", providercounts.Settings{Domain: "mg.example.com"}},
		{"mailgun", "domain", providercounts.Settings{APIKey: "key-secret"}},
		{"ses", "region", providercounts.Settings{APIKey: "key-secret"}},
	} {
		_, err := providercounts.New(c.provider, c.s)
		if err == nil || !strings.Contains(err.Error(), "reconcile."+c.field) || strings.Contains(err.Error(), "key-secret") {
			t.Errorf("%s without %s: %v", c.provider, c.field, err)
		}
	}
}
