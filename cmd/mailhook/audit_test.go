package main

import (
	"os"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/store"
)

// An action made with the CLI is in the audit trail once, as the CLI's (actor cli:$USER, via
// cli), with the status the API would have answered: a lift done (200, referencing its
// suppression_lifts row) and one refused (404); neither names the address.
func TestCLIActionsAreAuditedOnce(t *testing.T) {
	onCallEnv(t)
	t.Setenv("USER", "oncall")
	if _, err := runCLI(t, "", "suppressions", "lift", "jane.doe@example.com", "--reason", "mailbox exists again"); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "", "suppressions", "lift", "jane.doe@example.com", "--reason", "again"); exitCode(err) != exitNotFound {
		t.Fatalf("second lift: %v", err)
	}
	st, err := store.Open(t.Context(), os.Getenv("DATABASE_URL"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	entries, next, err := st.Audit.ListAudit(t.Context(), store.AuditFilter{Limit: 10})
	if err != nil || next != "" || len(entries) != 2 {
		t.Fatalf("audit: %v %q %v", entries, next, err)
	}
	for i, want := range []struct {
		status int
		result string
	}{{404, store.AuditRefused}, {200, store.AuditOK}} {
		e := entries[i]
		if e.Action != store.AuditSuppressionLift || e.Actor != "cli:oncall" || e.Via != store.AuditViaCLI || e.Status != want.status ||
			e.Result != want.result || e.Target != "scope:global" {
			t.Errorf("entry %d: %+v", i, e)
		}
		for _, v := range e.Params {
			if s, ok := v.(string); ok && strings.Contains(strings.ToLower(s), "jane") {
				t.Errorf("entry %d names the address: %+v", i, e)
			}
		}
	}
	if !strings.HasPrefix(entries[1].Ref, "suppression_lifts:") {
		t.Errorf("the lift's entry does not reference its row: %+v", entries[1])
	}
}
