#!/usr/bin/env bash
# Benchmarks GET /v1/suppressions/check, the check a sender makes before every send, against a
# million suppressions (docs/BENCHMARKS.md, "The suppression check"):
#
#   scripts/bench-suppression-check.sh
#   RUNS=5 RATE=2000 DURATION=60s scripts/bench-suppression-check.sh
#
# It prints its tables and writes nothing under docs/: record a run as a dated page,
# docs/benchmarks/<date>-<name>.md, and update its figure in docs/BENCHMARKS.md.
#
# It builds mailhook and mailhook-loadtest into $WORK, creates a fresh PostgreSQL database (DB)
# and migrates it, starts `mailhook serve --worker=false` on 127.0.0.1:$HTTP_PORT (no Temporal
# needed: the check reads PostgreSQL only), and runs `mailhook-loadtest suppression-check` RUNS
# times: the first run fills FILL generated suppressions (generate_series, inside PostgreSQL),
# every run sends RATE checks/s open loop for WARMUP + DURATION with HIT_SHARE of them suppressed,
# and reports the latency from each request's intended send time (p50/p95/p99/max), the rate
# answered correctly, errors, and the cores mailhook, PostgreSQL and the load generator used.
# Before each run it waits (up to QUIET_WAIT seconds) for the 1-minute load average to drop to
# MAX_LOAD, and the report records the load it ran under. Everything listens on 127.0.0.1; the
# script stops only the process it started.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-/tmp/mhbench-suppcheck}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
DB=${DB:-mailhook_suppcheck}
HTTP_PORT=${HTTP_PORT:-18081}
RUNS=${RUNS:-3}
FILL=${FILL:-1000000}
RATE=${RATE:-1000}
DURATION=${DURATION:-30s}
WARMUP=${WARMUP:-3s}
HIT_SHARE=${HIT_SHARE:-0.5}
MAX_LOAD=${MAX_LOAD:-1.5}
QUIET_WAIT=${QUIET_WAIT:-300}
TOKEN=${TOKEN:-bench-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')}

log() { printf '%s bench-suppression-check: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

MH_PID=
cleanup() {
	if [[ -n $MH_PID ]]; then
		kill -TERM "$MH_PID" 2>/dev/null || true
		wait "$MH_PID" 2>/dev/null || true
	fi
}
trap cleanup EXIT

# shellcheck source=scripts/bench-quiet.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench-quiet.sh"

mkdir -p "$WORK"
MH=$WORK/mailhook
LT=$WORK/mailhook-loadtest
log "go build -o $MH ./cmd/mailhook; go build -o $LT ./cmd/mailhook-loadtest"
(cd "$ROOT" && go build -o "$MH" ./cmd/mailhook && go build -o "$LT" ./cmd/mailhook-loadtest)
! timeout 1 bash -c ": <>/dev/tcp/127.0.0.1/$HTTP_PORT" 2>/dev/null || die "127.0.0.1:$HTTP_PORT is in use; set HTTP_PORT"

DBURL="$PG/$DB?sslmode=disable"
cat >"$WORK/config.yaml" <<EOF
http:
  address: "127.0.0.1:$HTTP_PORT"
database:
  url: $DBURL
temporal:
  # Not running: serve --worker=false starts without it, and the check never calls it.
  address: 127.0.0.1:1
suppression:
  scopes: {broadcast: marketing, outbound: transactional}
admin:
  tokens:
    - {name: bench, token: $TOKEN}
log:
  level: warn
EOF

log "fresh database $DB"
psql "$PG/postgres" -qc "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
"$MH" migrate --config "$WORK/config.yaml" 2>"$WORK/migrate.log" || die "migrate failed (see $WORK/migrate.log)"

"$MH" serve --worker=false --config "$WORK/config.yaml" 2>"$WORK/serve.log" &
MH_PID=$!
for _ in $(seq 100); do
	curl -fsS "http://127.0.0.1:$HTTP_PORT/healthz" >/dev/null 2>&1 && break
	sleep 0.2
done
curl -fsS "http://127.0.0.1:$HTTP_PORT/healthz" >/dev/null || die "mailhook did not start (see $WORK/serve.log)"

{
	echo "nproc: $(nproc)"
	free -m | sed -n 2p
	go version
	psql "$PG/postgres" -tAc 'SELECT version()'
	echo "tree: $(git -C "$ROOT" rev-parse --short HEAD) + $(git -C "$ROOT" status --short | wc -l) uncommitted paths, built $(date -u +%FT%TZ)"
	echo "FILL=$FILL RATE=$RATE DURATION=$DURATION WARMUP=$WARMUP HIT_SHARE=$HIT_SHARE"
} | tee "$WORK/machine.txt" >&2

rc=0
for run in $(seq "$RUNS"); do
	wait_quiet
	log "run $run of $RUNS"
	"$LT" suppression-check --url "http://127.0.0.1:$HTTP_PORT" --token "$TOKEN" --database-url "$DBURL" \
		--fill "$FILL" --rate "$RATE" --duration "$DURATION" --warmup "$WARMUP" --hit-share "$HIT_SHARE" --seed "$run" \
		--cpu "mailhook=$MH_PID" --cpu postgres=user:postgres --json "$WORK/run-$run.json" | tee "$WORK/run-$run.txt" || rc=1
done
log "results in $WORK (run-N.txt, run-N.json, machine.txt)"
exit $rc
