package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mailhook/mailhook/internal/store/storetest"
)

// mailhook backfill lists the endpoint's window with its reconcile block, accepts what it
// lists, prints the totals, and a second run of the finished window fetches nothing.
func TestBackfillCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if u, p, ok := r.BasicAuth(); !ok || u != "api" || p != "key-cli" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/v3/mg.example.com/events" {
			fmt.Fprintf(w, `{"items":[{"id":"cli-1","event":"delivered","timestamp":1795910400.5,"recipient":"a@example.com",`+
				`"message":{"headers":{"message-id":"m1@mg.example.com"}}}],"paging":{"next":"http://%s/v3/mg.example.com/events/p1"}}`, r.Host)
			return
		}
		_, _ = w.Write([]byte(`{"items":[],"paging":{}}`))
	}))
	defer srv.Close()
	dbURL := storetest.NewDatabase(t)
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("MG_API_KEY", "key-cli")
	cfgPath := filepath.Join(t.TempDir(), "mailhook.yaml")
	if err := os.WriteFile(cfgPath, []byte(`
endpoints:
  - name: mailgun
    provider: mailgun
    secrets: [mailgun-signing-key]
    reconcile:
      base_url: `+srv.URL+`
      api_key: ${MG_API_KEY}
      domain: mg.example.com
      rate: 50
`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() string {
		var out strings.Builder
		c := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
		c.SetArgs([]string{"backfill", "--config", cfgPath, "--endpoint", "mailgun", "--since", "2026-11-29", "--until", "2026-11-30"})
		c.SetOut(&out)
		c.SetErr(io.Discard)
		if err := c.Execute(); err != nil {
			t.Fatalf("backfill: %v", err)
		}
		return out.String()
	}
	if out := run(); !strings.Contains(out, "2 pages, 1 fetched, 1 accepted, 0 duplicates") {
		t.Errorf("first run printed %q", out)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("first run sent %d requests, want 2", n)
	}
	if out := run(); !strings.Contains(out, "1 accepted") || !strings.Contains(out, "(finished)") {
		t.Errorf("second run printed %q", out)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("the finished window was fetched again: %d requests", n)
	}
}
