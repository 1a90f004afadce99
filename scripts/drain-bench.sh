#!/usr/bin/env bash
# Drain a backlog of parked notifications (MAILHOOK_DRAIN_BACKLOG, default 20000: half as many
# messages with two versions each) to an HTTP sink that answers at once, a NATS sink and a
# RabbitMQ sink, on the real Temporal server (scripts/temporal-server.sh), and print each one's
# rate and its drainer's Temporal work. With BASE_REF=<commit>, the same backlog is drained to the
# HTTP sink of that tree in the same run (its harness gets the same map-based receiver, so the
# test sink is not what is measured).
# It prints its tables and writes nothing under docs/: record a run as a dated page,
# docs/benchmarks/<date>-<name>.md, and update its figure in docs/BENCHMARKS.md.
#
#   BASE_REF=f63898b scripts/drain-bench.sh
#
# Needs what make test needs (PostgreSQL, NATS, RabbitMQ, the real server's build).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${MAILHOOK_DRAIN_BACKLOG:-20000}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
export MAILHOOK_DRAIN_BACKLOG=$N MAILHOOK_DRAIN_REAL=1
log() { printf 'drain-bench: %s\n' "$*"; }

"$ROOT/scripts/ensure-postgres.sh" >/dev/null
"$ROOT/scripts/ensure-brokers.sh" >/dev/null
log "real server: $("$ROOT/scripts/temporal-server.sh" build)"

log "this tree ($(git -C "$ROOT" rev-parse --short HEAD)), $N parked per sink"
(cd "$ROOT" && go test -count=1 -timeout 30m -run '^TestBacklogDrainsToEveryKindOncePerID$' -v ./internal/e2e/) |
	grep -E 'sink .*drained|^(--- |FAIL|ok)' | tee "$WORK/this.txt"

if [[ -n ${BASE_REF:-} ]]; then
	base="$WORK/base"
	rm -rf "$base"
	git -C "$ROOT" worktree add -q --detach "$base" "$BASE_REF"
	trap 'git -C "$ROOT" worktree remove --force "$base"' EXIT
	# The receiver counted attempts by scanning every delivery so far: quadratic in a drain of
	# thousands, in the test sink, not in mailhook.
	python3 - "$base/internal/e2e/harness_test.go" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
old = """	attempt := 1
	for _, d := range r.got {
		if d.ID == id {
			attempt++
		}
	}"""
new = """	if r.tries == nil {
		r.tries = map[string]int{}
	}
	r.tries[id]++
	attempt := r.tries[id]"""
if old in s:
    s = s.replace(old, new).replace("	got     []delivery\n", "	got     []delivery\n	tries   map[string]int\n", 1)
open(p, "w").write(s)
PY
	cat >"$base/internal/e2e/drain_bench_base_test.go" <<'GO'
package e2e_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	sinkdelivery "github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/testenv"
)

// The HTTP half of TestBacklogDrainsToEveryKindOncePerID, for a tree without broker sinks.
func TestBacklogDrainsToHTTPBase(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MAILHOOK_DRAIN_BACKLOG"))
	srv := testenv.StartRealServer(t)
	tc, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: "default", Logger: sdklog.NewStructuredLogger(testenv.Logger())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	h := newHarness(t, harnessOptions{temporal: tc})
	ctx := context.Background()
	pool := h.svc.Store.Pool() // the base tree (BASE_REF) predates storetest.Pool
	if _, err := pool.Exec(ctx, `INSERT INTO sinks (name) VALUES ('app') ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
INSERT INTO notifications (id, provider, event_id, sink, type, status, attempts, body, parked_at, park_reason, message_id, version)
SELECT 'ntf_' || $2 || '_' || g, 'postscale', 'evt_' || $2 || '_' || g, $1, 'message.status_changed', 'parked', 1,
       jsonb_build_object('id', 'ntf_' || $2 || '_' || g, 'type', 'message.status_changed', 'created_at', now(),
                          'data', jsonb_build_object('message_id', 'msg_' || $2 || '_' || (g - 1) / 2, 'version', (g - 1) % 2 + 1,
                                                     'status', 'delivered')),
       now() - interval '10 seconds' + g * interval '1 microsecond', 'open', 'msg_' || $2 || '_' || (g - 1) / 2, (g - 1) % 2 + 1
FROM generate_series(1, $3::int) g`, "app", h.prefix, n); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := h.svc.Drainers().Wake(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	h.waitQuery(n, `SELECT count(*) FROM notifications WHERE sink = 'app' AND status = 'sent'`)
	var last time.Time
	if err := pool.QueryRow(ctx, `SELECT max(sent_at) FROM notifications WHERE sink = 'app'`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	took := last.Sub(start)
	h.waitSinkState("app", sinkdelivery.Closed, 0)
	t.Logf("sink app (base): %d parked drained in %s (%.0f/s)", n, took.Round(time.Millisecond), float64(n)/took.Seconds())
}
GO
	log "base tree ($BASE_REF), $N parked, HTTP sink only"
	(cd "$base" && go test -count=1 -timeout 30m -run '^TestBacklogDrainsToHTTPBase$' -v ./internal/e2e/) |
		grep -E 'sink .*drained|^(--- |FAIL|ok)' | tee "$WORK/base.txt"
fi
