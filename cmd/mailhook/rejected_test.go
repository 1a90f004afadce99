package main

import (
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// mailhook rejected list shows what GET /v1/rejections does, from the config's database, and
// filters by cause; a cause not in the list is a usage error.
func TestRejectedListShowsTheKeptRefusals(t *testing.T) {
	dbURL := storetest.NewDatabase(t)
	t.Setenv("MAILHOOK_CONFIG", "")
	t.Setenv("DATABASE_URL", dbURL)
	opts, err := serve.StoreOptions(config.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), dbURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if err := st.Rejected.InsertRejected(t.Context(), []store.RejectedRequest{
		{Endpoint: "postscale", Provider: "postscale", ReceivedAt: at, Cause: "bad_signature", Status: 401, Reason: "no matching signature",
			RemoteAddr: "192.0.2.7", Size: 12, Header: map[string][]string{}},
		{Endpoint: "unknown", ReceivedAt: at.Add(time.Minute), Cause: "unknown_endpoint", Status: 404, RemoteAddr: "192.0.2.8", Size: 2,
			Header: map[string][]string{}},
	}, []store.RejectedDrop{{Endpoint: "postscale", Hour: at.Truncate(time.Hour), Dropped: 5}}); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "", "rejected", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bad_signature", "unknown_endpoint", "192.0.2.7", "2 refused", "5 more refused but not kept"} {
		if !strings.Contains(out, want) {
			t.Errorf("rejected list lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "", "rejected", "list", "--cause", "unknown_endpoint", "--format", "json")
	if err != nil || strings.Contains(out, "bad_signature") || !strings.Contains(out, `"cause": "unknown_endpoint"`) {
		t.Errorf("rejected list --cause unknown_endpoint: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "", "rejected", "list", "--cause", "nonsense"); exitCode(err) != exitUsage {
		t.Errorf("--cause nonsense: %v, want exit %d", err, exitUsage)
	}
}
