#!/usr/bin/env bash
# Benchmarks memory before authentication (docs/BENCHMARKS.md): CONNS slow unsigned uploads held
# open at once against `mailhook serve`, each declaring a 1 MiB body, sending SENT bytes of it and
# stalling, while a provider sends signed webhooks and a monitor asks /healthz
# (`mailhook-loadtest slow-bodies`); this tree side by side with BASE_REF, in one run.
# It prints its tables and writes nothing under docs/: record a run as a dated page,
# docs/benchmarks/<date>-<name>.md, and update its figure in docs/BENCHMARKS.md.
#
#   scripts/slow-bodies-bench.sh
#
# Per TREE and SCENARIO, on a fresh database and the CLI's dev server (Temporal's cost is not
# what this measures): `one` sends every upload from 127.0.0.2 (one client), `many` from
# SOURCES_MANY addresses 127.0.0.2… in turn (many clients). mailhook's RSS is read from /proc
# right before the uploads (idle: started, nothing sent yet) and every 500 ms during them; the Go
# heap (/metrics) beside it once a second, into results/<scenario>-<tree>/memstats.txt.
#
# Environment (defaults in brackets): TREES [this base]  SCENARIOS [one many]  BASE_REF [4502de1]
#   CONNS [2000]  SENT [1000000]  HOLD [25s]  SOURCES_MANY [200]  READ_TIMEOUT [30s]
#   WORK [/tmp/mhslow]  PG [postgres://postgres@127.0.0.1:5432]  HTTP_PORT [18680]
#   TEMPORAL_PORT [17633]  TEMPORAL_CLI [$(go env GOPATH)/bin/temporal]
#   READING_BYTES, READING_PER_CLIENT [unset: mailhook's defaults] http.max_reading_bytes and
#   max_reading_bytes_per_client
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TREES=${TREES:-this base}
SCENARIOS=${SCENARIOS:-one many}
BASE_REF=${BASE_REF:-4502de1}
CONNS=${CONNS:-2000}
SENT=${SENT:-1000000}
HOLD=${HOLD:-25s}
SOURCES_MANY=${SOURCES_MANY:-200}
READ_TIMEOUT=${READ_TIMEOUT:-30s}
WORK=${WORK:-/tmp/mhslow}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
HTTP_PORT=${HTTP_PORT:-18680}
TEMPORAL_PORT=${TEMPORAL_PORT:-17633}
TEMPORAL_CLI=${TEMPORAL_CLI:-$(go env GOPATH)/bin/temporal}
READING_BYTES=${READING_BYTES:-}
READING_PER_CLIENT=${READING_PER_CLIENT:-}
DB=mailhook_slowbench
SECRET=whsec_slowbench_$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')

log() { printf '%s slow-bench: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

[[ -x $TEMPORAL_CLI ]] || die "no Temporal CLI at $TEMPORAL_CLI (set TEMPORAL_CLI)"
mkdir -p "$WORK/results"
log "go build ./cmd/mailhook ./cmd/mailhook-loadtest (this), ./cmd/mailhook at $BASE_REF (base)"
(cd "$ROOT" && go build -o "$WORK/mh-this" ./cmd/mailhook && go build -o "$WORK/loadtest" ./cmd/mailhook-loadtest)
if [[ " $TREES " == *" base "* ]]; then
	rm -rf "$WORK/ref-src"
	git -C "$ROOT" worktree prune
	git -C "$ROOT" worktree add --detach "$WORK/ref-src" "$BASE_REF" >/dev/null 2>&1 || die "git worktree add $BASE_REF failed"
	(cd "$WORK/ref-src" && go build -o "$WORK/mh-base" ./cmd/mailhook) || die "build of $BASE_REF failed"
	git -C "$ROOT" worktree remove --force "$WORK/ref-src"
fi

log "Temporal dev server on 127.0.0.1:$TEMPORAL_PORT"
"$TEMPORAL_CLI" server start-dev --ip 127.0.0.1 --port "$TEMPORAL_PORT" --headless --log-level warn \
	--search-attribute Provider=Keyword --search-attribute EventType=Keyword --search-attribute MessageID=Keyword \
	>"$WORK/temporal.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 60); do
	"$TEMPORAL_CLI" operator cluster health --address "127.0.0.1:$TEMPORAL_PORT" >/dev/null 2>&1 && break
	sleep 1
done

cat >"$WORK/config.yaml" <<EOF
http:
  address: "127.0.0.1:$HTTP_PORT"
  read_timeout: $READ_TIMEOUT
${READING_BYTES:+  max_reading_bytes: $READING_BYTES}
${READING_PER_CLIENT:+  max_reading_bytes_per_client: $READING_PER_CLIENT}
database:
  url: $PG/$DB?sslmode=disable
temporal:
  address: 127.0.0.1:$TEMPORAL_PORT
  namespace: default
endpoints:
  - {name: postscale, provider: postscale, secrets: ["$SECRET"]}
admin:
  tokens:
    - {name: bench, token: slowbench-token}
EOF

for scen in $SCENARIOS; do
	case $scen in
	one) sources=127.0.0.2 ;;
	many)
		sources=$(for i in $(seq 0 $((SOURCES_MANY - 1))); do printf '127.0.%d.%d,' $(((i + 2) / 250)) $(((i + 2) % 250 + 1)); done)
		sources=${sources%,}
		;;
	*) die "unknown scenario $scen" ;;
	esac
	for tree in $TREES; do
		out=$WORK/results/$scen-$tree
		mkdir -p "$out"
		psql "$PG/postgres" -Xqc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB" >/dev/null
		"$WORK/mh-$tree" migrate --config "$WORK/config.yaml" 2>"$out/migrate.log"
		"$WORK/mh-$tree" serve --config "$WORK/config.yaml" 2>"$out/mailhook.log" &
		pid=$!
		PIDS+=("$pid")
		for _ in $(seq 150); do
			curl -fsS "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 && break
			sleep 0.2
		done
		log "$scen/$tree: $CONNS uploads from $(tr ',' '\n' <<<"$sources" | wc -l) address(es), $SENT of 1 MiB each, held $HOLD"
		# The Go heap beside RSS, once a second (MiB): what the peak is made of (live bodies,
		# goroutine stacks, or garbage the GC's target lets accumulate).
		(while kill -0 "$pid" 2>/dev/null; do
			printf '%s ' "$(date -u +%H:%M:%S)"
			curl -s "http://127.0.0.1:$HTTP_PORT/metrics" |
				awk '/^go_goroutines /{printf "goroutines=%d ", $2} /^go_memstats_(heap_alloc|heap_inuse|heap_idle|heap_released|next_gc|stack_inuse|sys)_bytes /{sub("go_memstats_", "", $1); sub("_bytes", "", $1); printf "%s=%.1f ", $1, $2/1048576}'
			awk '/^VmRSS/{printf "rss=%.1f\n", $2/1024}' "/proc/$pid/status" 2>/dev/null || echo
			sleep 1
		done) >"$out/memstats.txt" 2>&1 &
		"$WORK/loadtest" slow-bodies --url "http://127.0.0.1:$HTTP_PORT" --postscale-secret "$SECRET" --conns "$CONNS" \
			--sources "$sources" --sent "$SENT" --hold "$HOLD" --pid "$pid" >"$out/result.json" 2>"$out/loadtest.log" ||
			log "$scen/$tree: slow-bodies failed (see $out/loadtest.log)"
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
done

python3 - "$WORK/results" <<'PY'
import json, os, sys
d = sys.argv[1]
rows = []
for name in sorted(os.listdir(d)):
    try:
        r = json.load(open(os.path.join(d, name, "result.json")))
    except (FileNotFoundError, ValueError):
        continue
    mib = lambda b: b / (1 << 20)
    ratio = r["peak_rss_bytes"] / r["idle_rss_bytes"] if r["idle_rss_bytes"] else 0
    rows.append((name, r["opened"], json.dumps(r["answers"], sort_keys=True), mib(r["idle_rss_bytes"]), mib(r["peak_rss_bytes"]), ratio,
                 json.dumps(r["healthz"], sort_keys=True), json.dumps(r["webhooks"], sort_keys=True)))
print("| run | uploads opened | their answers | idle RSS MiB | peak RSS MiB | peak/idle | /healthz | signed webhooks |")
print("|---|---|---|---|---|---|---|---|")
for row in rows:
    print("| %s | %d | %s | %.0f | %.0f | %.2f | %s | %s |" % row)
PY
