#!/usr/bin/env bash
# Measures the event explorer, a busy message's timeline and the audit trail's list
# (GET /v1/events, /v1/messages/{provider}/{id}/timeline, /v1/audit) against a database of
# EVENTS events, MESSAGES messages, REJECTED refused requests and AUDIT audit rows
# (docs/BENCHMARKS.md, "The event explorer"):
#
#   scripts/explorer-bench.sh                      # 10 M events, 2 M messages: ~15 GB, 20-40 min to seed
#   EVENTS=1000000 MESSAGES=200000 scripts/explorer-bench.sh
#   KEEP=1 scripts/explorer-bench.sh               # keep the database; SEED=0 reuses a kept one
#   SEED=0 KEEP=1 BASE_REF=main scripts/explorer-bench.sh  # the tree BASE_REF first, then this one
#
# It creates the database DB on PG (dropped at the end unless KEEP=1), migrates it with
# `mailhook migrate`, seeds it inside PostgreSQL with generate_series
# (scripts/explorer-bench-seed.sql), then runs TestExplorerBench (internal/httpapi), which
# answers each query shape RUNS times through the real handlers and store (server time: the
# handler's, JSON included, PostgreSQL on the same host) and prints p50, p95 and max per shape
# and the shape of each query's EXPLAIN (ANALYZE, BUFFERS) plan; then TestConsoleExplorerBench
# (internal/console) times every console page, rendering included. With BASE_REF, both run first
# from that commit (git archive into $WORK/base, its own tests and shapes) on the same database,
# then from this tree: side by side in one run. The schema is the one the seeding tree migrated.
# It writes nothing under docs/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-/tmp/mhbench-explorer}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
DB=${DB:-mh_explorer_bench}
EVENTS=${EVENTS:-10000000}
MESSAGES=${MESSAGES:-2000000}
BUSY=${BUSY:-2000}
REJECTED=${REJECTED:-100000}
AUDIT=${AUDIT:-100000}
RUNS=${RUNS:-60}
SEED=${SEED:-1}
KEEP=${KEEP:-0}
BASE_REF=${BASE_REF:-}

log() { printf '%s explorer-bench: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
URL="$PG/$DB?sslmode=disable"
cleanup() {
	if [ "$KEEP" != 1 ]; then
		psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null || true
	fi
}
trap cleanup EXIT

mkdir -p "$WORK"
if [ "$SEED" = 1 ]; then
	log "building mailhook"
	(cd "$ROOT" && go build -o "$WORK/mailhook" ./cmd/mailhook)
	psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null
	psql "$PG/postgres" -qc "CREATE DATABASE $DB" >/dev/null
	DATABASE_URL=$URL "$WORK/mailhook" migrate >/dev/null 2>&1
	log "seeding $EVENTS events, $MESSAGES messages, $REJECTED rejected requests, $AUDIT audit rows (load $(cut -d' ' -f1-3 /proc/loadavg))"
	start=$(date +%s)
	psql "$URL" -q -v events="$EVENTS" -v messages="$MESSAGES" -v busy="$BUSY" -v rejected="$REJECTED" -v audit="$AUDIT" \
		-f "$ROOT/scripts/explorer-bench-seed.sql"
	log "seeded in $(( $(date +%s) - start )) s; database $(psql "$URL" -tAc "SELECT pg_size_pretty(pg_database_size(current_database()))")"
fi
measure() { # dir label
	log "$2: the explorer's queries, $RUNS runs per shape (load $(cut -d' ' -f1-3 /proc/loadavg))"
	(cd "$1" && MAILHOOK_EXPLORER_BENCH_URL=$URL MAILHOOK_EXPLORER_BENCH_RUNS=$RUNS \
		go test -count=1 -run '^TestExplorerBench$' -v -timeout 2h ./internal/httpapi/ | grep -v '^=== RUN\|^--- PASS\|^PASS\|^ok')
	log "$2: the console's pages (load $(cut -d' ' -f1-3 /proc/loadavg))"
	(cd "$1" && MAILHOOK_EXPLORER_BENCH_URL=$URL MAILHOOK_EXPLORER_BENCH_RUNS=$RUNS \
		go test -count=1 -run '^TestConsoleExplorerBench$' -v -timeout 1h ./internal/console/ | grep -v '^=== RUN\|^--- PASS\|^PASS\|^ok')
}
if [ -n "$BASE_REF" ]; then
	rm -rf "$WORK/base" && mkdir -p "$WORK/base"
	git -C "$ROOT" archive "$BASE_REF" | tar -x -C "$WORK/base"
	measure "$WORK/base" "@base $BASE_REF ($(git -C "$ROOT" rev-parse --short "$BASE_REF"))"
fi
measure "$ROOT" "@new ($(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD || echo +changes))"
log "done (load $(cut -d' ' -f1-3 /proc/loadavg))"
