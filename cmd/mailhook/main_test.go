package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad config stops start-up before anything connects, with one line naming the key.
func TestBadConfigStopsStartupNamingTheKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("endpoints:\n  - name: ps\n    provider: postscale\n    secrets: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"serve", "worker", "migrate"} {
		c := root(slog.New(slog.DiscardHandler))
		c.SetArgs([]string{cmd, "--config", p})
		err := c.Execute()
		if err == nil || !strings.Contains(err.Error(), "endpoints[0].secrets") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: error %v, want one line naming endpoints[0].secrets", cmd, err)
		}
	}
}
