package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/testenv"
)

// retention.inbound_bodies: 0 keeps an inbound email's body out of the database once its
// notification is sent, while the notification still carries the whole email; unset, the
// body is kept (for retention.payloads).
func TestInboundBodiesAreRemovedOnceNotified(t *testing.T) {
	t.Parallel()
	zero := config.Period(0)
	for _, c := range []struct {
		name  string
		keep  *config.Period
		holds []string // the tables that must hold the body afterwards
	}{
		{"inbound_bodies 0", &zero, nil},
		{"default", nil, []string{"event_payloads", "notification_bodies"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{inboundBodies: c.keep})
			marker := "inbound-body-" + randomHex(8)
			emailID := h.id("em_body")
			text, html := "Hello, my order "+marker+" never came.", "<p>Hello, my order <b>"+marker+"</b> never came.</p>"
			body := `{"event":"email.received","timestamp":"2026-11-29T10:30:00Z","email_id":"` + emailID +
				`","from":"customer@example.com","to":"support@app.example","subject":"Where is my order","text":"` + text +
				`","html":"` + html + `"}`
			if code, resp := h.post(body); code != http.StatusOK || resp["status"] != "accepted" {
				t.Fatalf("post: %d %v", code, resp)
			}
			key := "email.received:" + emailID
			h.waitProcessed(key)

			testenv.WaitCount(t, "distinct notifications the sink accepted", testenv.Stall, 1, func() int { return len(h.sink.delivered()) })
			d := h.sink.delivered()[0]
			data, _ := d.Body["data"].(map[string]any)
			payload, _ := data["payload"].(map[string]any)
			if d.Body["type"] != "email.received" || payload["text"] != text || payload["html"] != html {
				t.Fatalf("the sink did not get the whole email: %v", d.Body)
			}

			// The event is processed, so whatever the store does with the body is committed.
			if got := tablesHolding(t, h, marker); !slices.Equal(got, c.holds) {
				t.Fatalf("the email's body is in %v, want %v", got, c.holds)
			}
			if code, resp := h.post(body); code != http.StatusOK || resp["status"] != "duplicate" {
				t.Fatalf("re-send: %d %v, want a duplicate", code, resp)
			}
			if c.keep != nil {
				code, resp := h.admin(http.MethodPost, "/v1/events/postscale/"+key+"/replay", `{"renotify":true}`)
				if code != http.StatusConflict {
					t.Fatalf("replay of an email whose body is gone: %d %v, want 409", code, resp)
				}
				var stub string
				if err := h.db.QueryRow(context.Background(), `
SELECT b.body::text FROM notifications n JOIN notification_bodies b ON b.id = n.id AND b.created_at = n.created_at
WHERE n.event_id = $1`, key).Scan(&stub); err != nil {
					t.Fatal(err)
				}
				t.Logf("the notification's stored body: %s", stub)
			}
		})
	}
}

// tablesHolding lists the tables (a partitioned table as one) with a row whose text holds s.
func tablesHolding(t *testing.T, h *harness, s string) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := h.db.Query(ctx, `
SELECT c.relname FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
WHERE ns.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
ORDER BY c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, table := range tables {
		var n int
		q := fmt.Sprintf(`SELECT count(*) FROM %s x WHERE strpos(x::text, $1) > 0`, pgx.Identifier{table}.Sanitize())
		if err := h.db.QueryRow(ctx, q, s).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out = append(out, table)
		}
	}
	return out
}
