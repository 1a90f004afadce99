#!/usr/bin/env bash
# Benchmarks mailhook against the ceiling of its design on this machine (docs/BENCHMARKS.md).
# It prints its tables and writes nothing under docs/: record a run as a dated page,
# docs/benchmarks/<date>-<name>.md, and update its figure in docs/BENCHMARKS.md.
#
#   scripts/loadtest-bench.sh            setup, RUNS interleaved runs of every phase, summary
#   scripts/loadtest-bench.sh summary    only print the summary of $RESULTS
#   START_RUN=4 RUNS=2 scripts/loadtest-bench.sh   add runs 4 and 5 to earlier results
#
# It starts its own Temporal (TEMPORAL_PORT; a fresh one per run): the CLI's in-memory dev server
# with TEMPORAL=dev (default), or with TEMPORAL=server a real Temporal server v1.29.1 with
# PostgreSQL persistence and visibility (scripts/temporal-server.sh, fresh databases each time),
# which is what users run and which the dev server flatters. It creates a fresh PostgreSQL
# database (DB), builds mailhook and mailhook-loadtest into $WORK, writes a config there, and per
# run executes, in order, the phases in PHASES:
#
#   baseline-start     mailhook-loadtest baseline --mode start       (SDK starts, no worker)
#   accept             mailhook serve --worker=false + mailhook-loadtest (accept path only; a
#                      separate `mailhook worker` drains afterwards, then the verdict)
#   baseline-complete  mailhook-loadtest baseline --mode complete    (4 regular activities)
#   e2e                mailhook serve + mailhook-loadtest            (same traffic as accept)
#   baseline-local     mailhook-loadtest baseline --mode complete --local db
#   baseline-local-all mailhook-loadtest baseline --mode complete --local all (not in the default PHASES)
#   mixed              mailhook serve + mailhook-loadtest with SendGrid batches, 20% duplicates
#                      (half of them concurrent), and a 500-request duplicate probe
#   fixed              the mixed traffic until FIXED_EVENTS (3,000) new events were sent, no
#                      probe: every tree processes the same work, so processed rates compare
#                      (under the 50-sender load a faster accept path otherwise accepts far more);
#                      FIXED_RATE=<requests/s> sends it open loop at that rate instead (below what
#                      the workers process, the accepting process starts every event itself)
#   outage             TEMPORAL=server only: the mixed traffic at OUTAGE_RATE requests/s for
#                      OUTAGE_LOAD (3m), with the
#                      Temporal server stopped from 30 s in for OUTAGE (2m) and then restarted on
#                      its databases; the verdict checks that every event was processed once
#   pg-outage          TEMPORAL=server only: the same traffic for PG_OUTAGE_LOAD (4m) against a
#                      database on a PostgreSQL cluster of the bench's own (initdb, port
#                      PGO_PORT), stopped (immediate) from 30 s in for PG_OUTAGE (180) seconds:
#                      acceptance through Temporal (issue 29); every answer should be 200
#   pg-flap            the same, PostgreSQL stopped for a third of PG_OUTAGE three times within
#                      it (a failover's flapping: restarted twice inside the window)
#   sizing             TEMPORAL=server only, as the Helm chart deploys it: `serve --worker=false`
#                      and a separate `mailhook worker`, on the bench's own PostgreSQL cluster
#                      (as PGSTATS=1), the fixed phase's traffic until SIZING_EVENTS (5,000) new
#                      events; it also records each table's pg_total_relation_size and rows
#                      before and after, the Temporal server's metrics (its billable `action`
#                      counter, persistence calls) and the worker's, and the CPU seconds of the
#                      HTTP process, the worker, Temporal and that PostgreSQL cluster over the run.
#                      scripts/sizing.sh runs it and turns it into the cost model.
#
# PGSTATS=1 runs the e2e, mixed and fixed phases against the bench's own PostgreSQL cluster
# (PGO_PORT, started with pg_stat_statements preloaded; the shared server is never restarted),
# mailhook connecting as the role mailhook_bench (TEMPORAL_PG=private with TEMPORAL=server puts
# the Temporal server's databases there too, so pg_stat_statements covers them: the fixed phase
# writes every statement's calls, rows, time and WAL to run*-fixed*.statements.tsv, and with or
# without PGSTATS each table's rows written to *.tables-before/after.tsv); the load generator
# (--pg-stats-role) reports,
# per accepted event, what that role did to PostgreSQL from the first request until every
# accepted event was processed: statements and round trips (pg_stat_statements calls, without
# and with BEGIN/COMMIT/ROLLBACK), rows written (pg_stat_database) and WAL bytes (pg_stat_wal).
#
# The acceptance phases (run them with PHASES="pgbench accept-nodrain accept-2000 burst"):
#
#   pgbench            raw `INSERT … ON CONFLICT DO NOTHING` into mailhook's own webhook_events
#                      (a fresh migrated database), CONCURRENCY clients: the database's ceiling
#   accept-nodrain     serve --worker=false + loadtest --no-drain, CONCURRENCY senders, new events
#                      only: accept throughput (the serve process starts workflows meanwhile)
#   accept-2000        the same at an open-loop 2,000 requests/s with 10% re-sends: latency
#   burst              serve (worker + relay) + loadtest --events BURST: the burst accepted, then
#                      drained, with the full verdict
#   burst-small        the same with BURST_SMALL events, about as many as the e2e phase sends
#   accept-cpu         serve --worker=false + loadtest --no-drain until CPU_EVENTS (30,000) new
#                      events were accepted, mailhook's database alone on the bench's own
#                      PostgreSQL cluster (PGO_PORT): the CPU time (utime + stime, /proc) per
#                      accepted event of the serve process, of that cluster (postmaster and every
#                      backend), of the Temporal server and its backends on the shared server, and
#                      of the load generator. On a CPU-bound machine the rate is the cores over the
#                      CPU per event, and CPU time per event moves far less with other work than
#                      the rate does: compare trees by it (REFS, ROTATE, several runs).
#   accept-ir          the same with `mailhook serve` under valgrind's callgrind: after
#                      IR_WARMUP (300) events, the instructions serve executes for IR_EVENTS
#                      (2,000) more, IR_CONCURRENCY (8) senders (callgrind runs one thread at a
#                      time, about 50 times slower). Instruction counts barely move with other
#                      work on the machine; they leave out PostgreSQL (its CPU time is reported as
#                      in accept-cpu), cache misses and waiting.
#
# Side by side with earlier trees: BASE_REF=<commit> builds that commit's mailhook into
# $WORK/mh-base, and a phase written NAME@base (e.g. PHASES="mixed mixed@base") runs NAME with
# it; PREV_REF and NAME@prev likewise (a second tree). The load generator is always this tree's.
# The summary puts them next to each other.
# More trees at once: REFS="alias=<commit> …" builds each commit's mailhook into $WORK/mh-ref-<alias>,
# and NAME@<alias> runs NAME with it and this tree's config (the tree must know its keys, as every
# tree from 23cb9aa on does). ROTATE=k starts run r's PHASES k·(r−1) phases in, so that what
# builds up within a run (the started workflows in its one Temporal server) falls on every tree.
# NAME+eager runs NAME with temporal.eager_start on.
# NAME+nometa sends no metadata or tags though METADATA=1 (what metadata costs one tree);
# NAME+noidx drops, after the migrations, the three indexes 00023 adds to every acceptance
# insert (webhook_events by provider, by type, by message: the event explorer's, issue 43)
# (accept-cpu and accept-ir only).
# NAME+flood also sends FLOOD_RATE (1,000) badly signed Postscale requests per second from
# 127.0.0.3 for the whole send phase (loadtest --flood-rate), and records after it the kept
# rejections (rows, bytes, dropped) beside the per-endpoint budget and the not-kept counter;
# NAME+flood+norecord does so with retention.rejected_requests: 0 (nothing kept); NAME@base+flood
# and NAME@base+flood+norecord run them with BASE_REF (from 5063e00 on). Issue 43's goal:
#   PHASES="accept-nodrain accept-nodrain+flood accept-nodrain+flood+norecord"
# beside main: BASE_REF=main PHASES="accept-nodrain+flood accept-nodrain+flood+norecord
#   accept-nodrain@base+flood accept-nodrain@base+flood+norecord"
# METADATA=1: every delivery event carries a sender's metadata and tags (loadtest --metadata), in
# every phase and for every tree (a tree before issue 42 receives and ignores them).
#
# Before each phase it waits (up to QUIET_WAIT seconds) for the 1-minute load average to drop
# to MAX_LOAD, and records the load it ran under. Everything listens on 127.0.0.1 only, and the
# script stops only the processes it started.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-/tmp/mhbench}
RESULTS=${RESULTS:-$WORK/results}
TEMPORAL_PORT=${TEMPORAL_PORT:-17233}
HTTP_PORT=${HTTP_PORT:-18080}
SINK_PORT=${SINK_PORT:-19100}
DB=${DB:-mailhook_bench}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
PG_SHARED=$PG # where the Temporal server's databases are (unless TEMPORAL_PG=private)
RUNS=${RUNS:-3}
DURATION=${DURATION:-15s}
WARMUP=${WARMUP:-3s}
CONCURRENCY=${CONCURRENCY:-50}
MAX_LOAD=${MAX_LOAD:-1.5}
QUIET_WAIT=${QUIET_WAIT:-900}
DRAIN_TIMEOUT=${DRAIN_TIMEOUT:-15m}
BURST=${BURST:-50000}
BURST_SMALL=${BURST_SMALL:-5000}
BURST_DRAIN_TIMEOUT=${BURST_DRAIN_TIMEOUT:-120m}
INBOX_RATE=${INBOX_RATE:-2000}
OUTAGE=${OUTAGE:-120}
FIXED_EVENTS=${FIXED_EVENTS:-3000}
OUTAGE_LOAD=${OUTAGE_LOAD:-180s}
OUTAGE_RATE=${OUTAGE_RATE:-30} # requests/s, open loop: about 60 events/s, what the drain can follow
PG_OUTAGE=${PG_OUTAGE:-180}
PG_OUTAGE_LOAD=${PG_OUTAGE_LOAD:-240s}
PGO_PORT=${PGO_PORT:-15433}
FLOOD_RATE=${FLOOD_RATE:-1000}
SIZING_EVENTS=${SIZING_EVENTS:-5000}
CPU_EVENTS=${CPU_EVENTS:-30000}
IR_EVENTS=${IR_EVENTS:-2000}
IR_WARMUP=${IR_WARMUP:-300}
IR_CONCURRENCY=${IR_CONCURRENCY:-8}
SIZING_SEED=${SIZING_SEED:-1} # the traffic's seed (its lifecycles, re-sends, batches)
WORKER_METRICS_PORT=${WORKER_METRICS_PORT:-19090}   # sizing: the worker's /metrics
TEMPORAL_METRICS_PORT=${TEMPORAL_METRICS_PORT:-19091} # sizing: the Temporal server's /metrics
PHASES=${PHASES:-baseline-start accept baseline-complete e2e baseline-local mixed}
# FRESH=phase starts a new in-memory dev server before every phase (no phase inherits another's
# history); FRESH=run (default) one per run.
FRESH=${FRESH:-run}
TEMPORAL=${TEMPORAL:-dev}
TEMPORAL_CLI=${TEMPORAL_CLI:-$(go env GOPATH)/bin/temporal}
MH=$WORK/mh
LT=$WORK/mh-loadtest # the load generator, always this tree's
MH_BASE=$WORK/mh-base
BASE_REF=${BASE_REF:-}
MH_PREV=$WORK/mh-prev
PREV_REF=${PREV_REF:-}
MHBIN=$MH # the mailhook of the phase running (MH, or MH_BASE for NAME@base)
CONFIG_BASE=$WORK/config-base.yaml
MHCONFIG=$WORK/config.yaml # the config of the phase running
EAGER=false                # NAME+eager: temporal.eager_start on
FLOOD=()                   # NAME+flood: the loadtest's flood flags
CONFIG=$WORK/config.yaml
TOKEN=bench-admin-token-0123456789
PS_SECRET=whsec_bench_postscale_secret

log() { printf '%s bench: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

STARTED=() # pids this script started, stopped on exit
cleanup() {
	for pid in "${STARTED[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${STARTED[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
}

stop_pid() {
	local pid=$1
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

secs() { # 15s → 15
	local d=$1
	d=${d%s}
	echo "${d%.*}"
}

port_free() { ! timeout 1 bash -c ": <>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# shellcheck source=scripts/bench-quiet.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench-quiet.sh"

setup() {
	mkdir -p "$WORK" "$RESULTS"
	log "go build -o $MH ./cmd/mailhook; go build -o $LT ./cmd/mailhook-loadtest"
	(cd "$ROOT" && go build -o "$MH" ./cmd/mailhook && go build -o "$LT" ./cmd/mailhook-loadtest)
	build_ref() { # build_ref <ref> <output>
		log "go build -o $2 ./cmd/mailhook at $1"
		rm -rf "$WORK/ref-src"
		git -C "$ROOT" worktree add --detach "$WORK/ref-src" "$1" >/dev/null 2>&1 ||
			die "git worktree add $1 failed"
		(cd "$WORK/ref-src" && go build -o "$2" ./cmd/mailhook)
		git -C "$ROOT" worktree remove --force "$WORK/ref-src"
	}
	[[ -z $BASE_REF ]] || build_ref "$BASE_REF" "$MH_BASE"
	[[ -z $PREV_REF ]] || build_ref "$PREV_REF" "$MH_PREV"
	local r
	for r in ${REFS:-}; do
		[[ $r == *=* ]] || die "REFS: $r is not alias=<commit>"
		build_ref "${r#*=}" "$WORK/mh-ref-${r%%=*}"
	done
	[[ -x $TEMPORAL_CLI ]] || die "no Temporal CLI at $TEMPORAL_CLI (set TEMPORAL_CLI)"
	[[ $TEMPORAL == dev || $TEMPORAL == server ]] || die "TEMPORAL=$TEMPORAL: want dev or server"
	for p in $TEMPORAL_PORT $HTTP_PORT $SINK_PORT; do
		port_free "$p" || die "127.0.0.1:$p is in use; set TEMPORAL_PORT / HTTP_PORT / SINK_PORT"
	done
	[[ -f $WORK/sg.pem ]] || "$LT" keygen --out "$WORK/sg.pem" | tail -1 >"$WORK/sg.pub"
	[[ -f $WORK/sink.secret ]] || echo "whsec_$(head -c 32 /dev/urandom | base64)" >"$WORK/sink.secret"
	cat >"$CONFIG" <<EOF
http:
  address: "127.0.0.1:$HTTP_PORT"
database:
  url: $PG/$DB?sslmode=disable
temporal:
  address: 127.0.0.1:$TEMPORAL_PORT
  namespace: default
  task_queue: \${MAILHOOK_BENCH_TASK_QUEUE:-mailhook-bench}
  eager_start: \${MAILHOOK_EAGER_START:-false}
endpoints:
  - {name: postscale, provider: postscale, secrets: ["$PS_SECRET"]}
  - {name: sendgrid, provider: sendgrid, secrets: ["$(cat "$WORK/sg.pub")"]}
sinks:
  - name: loadtest
    url: http://127.0.0.1:$SINK_PORT/sink
    secret: "$(cat "$WORK/sink.secret")"
    types: [message.status_changed, email.received, suppression.added]
admin:
  tokens:
    - {name: bench, token: $TOKEN}
EOF
	# The base tree may not know the newer keys (its config is strict). One that knows
	# temporal.eager_start gets it as this tree does: left out, it would run with its default
	# (on since ea4b08f, about twice the rate) against this tree's off.
	if [[ -n $BASE_REF ]] && git -C "$ROOT" grep -q 'yaml:"eager_start"' "$BASE_REF" -- internal/config 2>/dev/null; then
		cp "$CONFIG" "$CONFIG_BASE"
	else
		sed '/eager_start/d' "$CONFIG" >"$CONFIG_BASE"
	fi
	if [[ -n $BASE_REF ]] && git -C "$ROOT" grep -q 'yaml:"rejected_requests"' "$BASE_REF" -- internal/config 2>/dev/null; then
		BASE_NORECORD=1
	fi
	log "fresh database $DB"
	psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
	"$MH" migrate --config "$CONFIG" 2>"$WORK/migrate.log"
	start_temporal
	{
		echo "nproc: $(nproc)"
		free -m | sed -n 2p
		go version
		"$TEMPORAL_CLI" --version
		echo "temporal: $TEMPORAL"
		[[ -z $BASE_REF ]] || echo "base: $BASE_REF ($(git -C "$ROOT" rev-parse --short "$BASE_REF"))"
		[[ -z $PREV_REF ]] || echo "prev: $PREV_REF ($(git -C "$ROOT" rev-parse --short "$PREV_REF"))"
		for r in ${REFS:-}; do
			echo "ref ${r%%=*}: ${r#*=} ($(git -C "$ROOT" rev-parse --short "${r#*=}"))"
		done
		psql "$PG/postgres" -tAc 'SELECT version()'
		uname -sr
		echo "runs from ${START_RUN:-1}: FRESH=$FRESH PHASES=$PHASES DURATION=$DURATION WARMUP=$WARMUP CONCURRENCY=$CONCURRENCY"
		echo "tree: $(git -C "$ROOT" rev-parse --short HEAD) + $(git -C "$ROOT" status --short | wc -l) uncommitted paths, built $(date -u +%FT%TZ)"
	} >>"$RESULTS/machine.txt"
}

# start_temporal (re)starts Temporal, so every run starts from the same state: the in-memory dev
# server, or the real server on fresh databases.
start_temporal() {
	if [[ -n ${TEMPORAL_PID:-} ]]; then
		stop_pid "$TEMPORAL_PID"
		for _ in $(seq 30); do
			port_free "$TEMPORAL_PORT" && break
			sleep 1
		done
	fi
	if [[ $TEMPORAL == server ]]; then
		log "Temporal server v1.29.1 (PostgreSQL, SQL plugin ${TEMPORAL_SERVER_PLUGIN:-postgres12_pgx}, scripts/temporal-server.sh's default) on 127.0.0.1:$TEMPORAL_PORT"
		local metrics=
		[[ " $PHASES " != *" sizing "* ]] || metrics=$TEMPORAL_METRICS_PORT
		local tpg=$PG
		if [[ ${TEMPORAL_PG:-} == private ]]; then
			[[ ${PGSTATS:-} == 1 ]] || die "TEMPORAL_PG=private needs PGSTATS=1"
			pgo pg_ctl -D "$WORK/pgo/data" status >/dev/null 2>&1 || start_private_pg
			tpg=postgres://postgres@127.0.0.1:$PGO_PORT
		fi
		TEMPORAL_SERVER_METRICS_PORT=$metrics \
			TEMPORAL_SERVER_PORT=$TEMPORAL_PORT TEMPORAL_SERVER_STATE=$WORK/temporal-server TEMPORAL_CLI=$TEMPORAL_CLI PG=$tpg \
			"$ROOT/scripts/temporal-server.sh" start >/dev/null 2>>"$WORK/temporal.log" ||
			die "scripts/temporal-server.sh start failed (see $WORK/temporal.log)"
		TEMPORAL_PID=$(cat "$WORK/temporal-server/server.pid")
		STARTED+=("$TEMPORAL_PID")
		return
	fi
	log "Temporal dev server (in memory) on 127.0.0.1:$TEMPORAL_PORT"
	"$TEMPORAL_CLI" server start-dev --ip 127.0.0.1 --port "$TEMPORAL_PORT" --headless --log-level warn \
		--search-attribute Provider=Keyword --search-attribute EventType=Keyword --search-attribute MessageID=Keyword \
		>>"$WORK/temporal.log" 2>&1 &
	TEMPORAL_PID=$!
	STARTED+=("$TEMPORAL_PID")
	for _ in $(seq 60); do
		port_free "$TEMPORAL_PORT" || break
		sleep 1
	done
	sleep 3
}

# start_mailhook <label> [serve flags…]: starts `mailhook serve`, waits for /readyz.
start_mailhook() {
	local label=$1
	shift
	MAILHOOK_EAGER_START=$EAGER "$MHBIN" "$@" --config "$MHCONFIG" 2>"$WORK/$label.log" &
	MH_PID=$!
	STARTED+=("$MH_PID")
	for _ in $(seq 100); do
		if curl -fsS "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1; then
			return
		fi
		sleep 0.2
	done
	die "mailhook did not become ready (see $WORK/$label.log)"
}

# pgo <pg_ctl args…>: pg_ctl of the bench's own PostgreSQL cluster ($WORK/pgo), as user
# postgres when run as root (initdb refuses root). The shared server on 5432 is never stopped.
pgo() {
	local bin
	bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
	[[ -x $bin/pg_ctl ]] || die "pg-outage needs PostgreSQL's server binaries (/usr/lib/postgresql/*/bin)"
	if [[ $(id -u) == 0 ]]; then
		runuser -u postgres -- "$bin/$1" "${@:2}"
	else
		"$bin/$1" "${@:2}"
	fi
}
start_private_pg() {
	if [[ ! -d $WORK/pgo/data ]]; then
		mkdir -p "$WORK/pgo"
		[[ $(id -u) == 0 ]] && chown postgres "$WORK/pgo"
		pgo initdb -D "$WORK/pgo/data" -U postgres -A trust -E UTF8 --no-sync >"$WORK/pgo-initdb.log" 2>&1 ||
			die "initdb failed (see $WORK/pgo-initdb.log)"
	fi
	pgo pg_ctl -D "$WORK/pgo/data" -l "$WORK/pgo/postgres.log" -w \
		-o "-p $PGO_PORT -k $WORK/pgo -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off \
			-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.max=5000 \
			-c pg_stat_statements.track_planning=on" start >/dev/null ||
		die "the bench's PostgreSQL did not start (see $WORK/pgo/postgres.log)"
}
stop_private_pg() { pgo pg_ctl -D "$WORK/pgo/data" -m "${1:-fast}" -w stop >/dev/null 2>&1 || true; }

# fresh_db <name>: drops and re-creates a database and migrates it with mailhook.
fresh_db() {
	psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null
	DATABASE_URL="$PG/$1?sslmode=disable" "$MHBIN" migrate 2>>"$WORK/migrate.log"
}

cpu_flags() { # --cpu flags for the loadtest and the baseline (postgres: every backend, all databases)
	echo "--cpu temporal=$TEMPORAL_PID --cpu postgres=user:postgres $*"
}

snapshot_top() { # top in the middle of the measured window, and 20 s into the drain
	local out=$1
	(
		sleep $(($(secs "$DURATION") / 2 + 1))
		top -b -n1 -w 200 | head -20 >"$out"
		sleep $(($(secs "$DURATION") / 2 + 20))
		top -b -n1 -w 200 | head -20 >"$out-drain"
	) &
}

loadtest() { # loadtest <out-prefix> [extra flags…]
	local out=$1
	shift
	# shellcheck disable=SC2046
	"$LT" --url "http://127.0.0.1:$HTTP_PORT" --postscale-secret "$PS_SECRET" \
		--sendgrid-key "$WORK/sg.pem" --sink-listen "127.0.0.1:$SINK_PORT" --sink-secret "$(cat "$WORK/sink.secret")" \
		--database-url "$PG/$DB?sslmode=disable" --token "$TOKEN" --concurrency "$CONCURRENCY" \
		--duration "$DURATION" --warmup "$WARMUP" --drain-timeout "$DRAIN_TIMEOUT" \
		--temporal-address "127.0.0.1:$TEMPORAL_PORT" --json "$out.json" ${METADATA:+--metadata} "${FLOOD[@]}" "$@" >"$out.txt" 2>&1
}

# rejections_kept <out>: after a +flood phase, while mailhook still runs, what the rejected-request
# recorder kept (rows and bytes per endpoint), what it counted as dropped, and the not-kept
# counter, into <out>.rejections.json.
rejections_kept() {
	local out=$1 notkept
	sleep 1 # the writer flushes every 200 ms
	notkept=$(curl -fsS "http://127.0.0.1:$HTTP_PORT/metrics" | awk '/^mailhook_webhook_rejections_not_kept_total/ {s += $2} END {print s + 0}')
	psql "$PG/$DB" -Atc "
SELECT json_build_object(
  'kept', (SELECT coalesce(json_object_agg(endpoint, json_build_object('rows', n, 'body_bytes', b, 'table_bytes_est', b + 512 * n)), '{}')
           FROM (SELECT endpoint, count(*) n, coalesce(sum(length(body)), 0) b FROM rejected_requests GROUP BY 1) k),
  'dropped', (SELECT coalesce(sum(dropped), 0) FROM rejected_request_drops),
  'not_kept_metric', $notkept,
  'table_bytes', pg_total_relation_size('rejected_requests'),
  'budget', json_build_object('rows_per_hour', 1000, 'bytes_per_hour', 16777216))" >"$out.rejections.json" 2>/dev/null ||
		echo '{}' >"$out.rejections.json"
}

# pg_databases <out>: per database of the shared server (mailhook's and Temporal's) and of the
# bench's own cluster when it runs, pg_stat_database's commits, rollbacks and rows written
# (inserted + updated + deleted), tab-separated: the fixed phase writes them before and after, so
# what Temporal's persistence did per event shows beside what mailhook did.
pg_databases() {
	local url
	: >"$1"
	for url in "$PG" postgres://postgres@127.0.0.1:$PGO_PORT; do
		psql "$url/postgres" -AtF$'\t' -c "
SELECT '${url##*:}', datname, xact_commit, xact_rollback, tup_inserted + tup_updated + tup_deleted, blks_read + blks_hit
FROM pg_stat_database WHERE datname IS NOT NULL AND datname NOT IN ('template0', 'template1')" >>"$1" 2>/dev/null || true
	done
}

# pg_tables <database URL> <out>: per table of that database (partitions counted in their root),
# pg_stat_user_tables' rows inserted, updated (of which HOT), deleted, and the table's index count
# (an insert and a non-HOT update write one entry into every index), tab-separated. The fixed
# phase writes them before and after its load: mailhook's rows per event by table.
pg_tables() {
	psql "$1" -AtF$'\t' -c "
SELECT coalesce(pr.relname, s.relname), sum(s.n_tup_ins), sum(s.n_tup_upd), sum(s.n_tup_hot_upd), sum(s.n_tup_del),
       max((SELECT count(*) FROM pg_index i WHERE i.indrelid = s.relid))
FROM pg_stat_user_tables s
LEFT JOIN pg_class pr ON pr.oid = pg_partition_root(s.relid) AND pr.oid <> s.relid
GROUP BY 1 ORDER BY 1" >"$2" 2>/dev/null || : >"$2"
}

# pg_backend_cpu <out>: per PostgreSQL backend of the shared server and of the bench's own
# cluster, its database and the CPU it has used (utime + stime, clock ticks, /proc/<pid>/stat),
# tab-separated; background processes (walwriter, checkpointer, autovacuum …) as "(<type>)". The
# fixed phase writes it before and after its load (before mailhook stops: its backends end with
# it), so PostgreSQL's CPU splits by database: mailhook's, Temporal's and its visibility's.
pg_backend_cpu() {
	local url pid db urls=("$PG")
	: >"$1"
	# With PGSTATS=1 a phase's $PG is the bench's own cluster: list it once.
	[[ ${PG##*:} == "$PGO_PORT" ]] || urls+=("postgres://postgres@127.0.0.1:$PGO_PORT")
	for url in "${urls[@]}"; do
		psql "$url/postgres" -AtF$'\t' -c "
SELECT pid, coalesce(datname, '(' || backend_type || ')') FROM pg_stat_activity" 2>/dev/null |
			while IFS=$'\t' read -r pid db; do
				[[ -r /proc/$pid/stat ]] || continue
				printf '%s\t%s\t%s\t%s\n' "${url##*:}" "$pid" "$db" \
					"$(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$pid/stat" 2>/dev/null)"
			done >>"$1" || : # the bench's own cluster is not running without PGSTATS: nothing to list
	done
}

# temporal_backends <out>: the CPU each backend of the Temporal server's two databases on the
# shared server has used (pid, clock ticks from /proc/<pid>/stat), tab-separated; accept-cpu writes
# it before and after its load. A backend that ended in between is lost, one that started counts
# whole.
temporal_backends() {
	local pid
	psql "$PG_SHARED/postgres" -AtF$'\t' -c "
SELECT pid FROM pg_stat_activity WHERE datname IN ('temporal_$TEMPORAL_PORT', 'temporal_visibility_$TEMPORAL_PORT')" 2>/dev/null |
		while read -r pid; do
			[[ -r /proc/$pid/stat ]] || continue
			printf '%s\t%s\n' "$pid" "$(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$pid/stat" 2>/dev/null)"
		done >"$1"
}

# pg_statements <out>: with PGSTATS=1, pg_stat_statements of every database on the bench's own
# cluster (mailhook's and, with TEMPORAL_PG=private, Temporal's two), per statement: database,
# role, calls, rows, execution and planning time (ms; the cluster tracks planning), WAL bytes,
# blocks dirtied, blocks read (hit or not), the query's first 400 characters, and the plans made
# (custom or generic: a prepared statement executed on a cached plan adds a call, not a plan),
# tab-separated. The fixed phase resets them before its load and writes them after.
pg_statements() {
	psql "postgres://postgres@127.0.0.1:$PGO_PORT/postgres" -AtF$'\t' -c "
SELECT d.datname, r.rolname, s.calls, s.rows, round(s.total_exec_time::numeric, 1), round(s.total_plan_time::numeric, 1),
       s.wal_bytes, s.shared_blks_dirtied, s.shared_blks_hit + s.shared_blks_read,
       regexp_replace(left(s.query, 400), '\s+', ' ', 'g'), s.plans
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid JOIN pg_roles r ON r.oid = s.userid
ORDER BY s.total_exec_time DESC" >"$1" 2>/dev/null || : >"$1"
}

# relation_sizes <database URL> <out>: per table (partitions counted in their root), the bytes of
# pg_total_relation_size, of its indexes, and its rows (tab-separated).
relation_sizes() {
	local t
	psql "$1" -AtF$'\t' -c "
SELECT coalesce(pr.relname, c.relname), sum(pg_total_relation_size(c.oid)), sum(pg_indexes_size(c.oid))
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
LEFT JOIN pg_class pr ON pr.oid = pg_partition_root(c.oid) AND pr.oid <> c.oid
WHERE c.relkind = 'r' GROUP BY 1 ORDER BY 1" | while IFS=$'\t' read -r t total idx; do
		printf '%s\t%s\t%s\t%s\n' "$t" "$total" "$idx" "$(psql "$1" -Atc "SELECT count(*) FROM \"$t\"")"
	done >"$2"
}

phase() { # phase <run> <name>[@base|@prev][+eager][+flood[+norecord]]
	local run=$1 name=$2 out="$RESULTS/run$1-$2" mods=" "
	while [[ $name == *+* ]]; do
		mods+="${name##*+} "
		name=${name%+*}
	done
	MHBIN=$MH MHCONFIG=$CONFIG EAGER=false FLOOD=()
	case $name in
	*@base)
		[[ -x $MH_BASE ]] || die "phase $2 needs BASE_REF"
		MHBIN=$MH_BASE MHCONFIG=$CONFIG_BASE
		;;
	*@prev)
		[[ -x $MH_PREV ]] || die "phase $2 needs PREV_REF"
		MHBIN=$MH_PREV
		;;
	*@*)
		MHBIN=$WORK/mh-ref-${name##*@}
		[[ -x $MHBIN ]] || die "phase $2 needs ${name##*@}=<commit> in REFS"
		;;
	esac
	name=${name%@*}
	[[ $mods == *" eager "* ]] && EAGER=true
	[[ $mods == *" nometa "* ]] && local METADATA=
	[[ $mods == *" flood "* ]] && FLOOD=(--flood-rate "$FLOOD_RATE" --flood-source 127.0.0.3)
	if [[ $mods == *" norecord "* ]]; then
		[[ $MHBIN == "$MH" || ($MHBIN == "$MH_BASE" && -n ${BASE_NORECORD:-}) ]] ||
			die "phase $2: +norecord needs a tree that knows retention.rejected_requests (this one, or a BASE_REF from 5063e00 on)"
		{
			cat "$MHCONFIG"
			printf 'retention:\n  rejected_requests: "0"\n'
		} >"$WORK/config-norecord.yaml"
		local MHCONFIG=$WORK/config-norecord.yaml
	fi
	local pgstats=()
	if [[ ${PGSTATS:-} == 1 && $name =~ ^(e2e|mixed|fixed)$ ]]; then
		pgstats=(--pg-stats-role mailhook_bench)
		pgo pg_ctl -D "$WORK/pgo/data" status >/dev/null 2>&1 || start_private_pg
		local PG=postgres://postgres@127.0.0.1:$PGO_PORT
		psql "$PG/postgres" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" \
			-c "DO \$\$ BEGIN CREATE ROLE mailhook_bench LOGIN SUPERUSER; EXCEPTION WHEN duplicate_object THEN END \$\$" >/dev/null
		sed "s#^  url: .*/$DB?sslmode=disable#  url: postgres://mailhook_bench@127.0.0.1:$PGO_PORT/$DB?sslmode=disable#" \
			"$MHCONFIG" >"$WORK/config-pgstats.yaml"
		local MHCONFIG=$WORK/config-pgstats.yaml
	fi
	[[ $FRESH == phase ]] && start_temporal
	wait_quiet
	log "run $run: $2 (load average $(cut -d' ' -f1-3 /proc/loadavg))"
	snapshot_top "$out.top"
	local rc=0
	# Every mailhook phase starts on an empty database: the relay in a worker would otherwise
	# start the rows an earlier phase left waiting, inside this phase's measurement.
	case $name in
	accept | e2e | mixed | fixed | outage) fresh_db "$DB" ;;
	esac
	case $name in
	baseline-start | baseline-complete | baseline-local | baseline-local-all)
		local mode=start local=none
		[[ $name == baseline-start ]] || mode=complete
		[[ $name == baseline-local ]] && local=db
		[[ $name == baseline-local-all ]] && local=all
		# Temporal's own PostgreSQL work, for scripts/pg_attribution.py (no mailhook database).
		pg_backend_cpu "$out.pgcpu-before.tsv"
		[[ ${TEMPORAL_PG:-} != private ]] ||
			psql "postgres://postgres@127.0.0.1:$PGO_PORT/postgres" -qAtc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" \
				-c "SELECT pg_stat_statements_reset()" >/dev/null
		# shellcheck disable=SC2046
		"$LT" baseline --temporal "127.0.0.1:$TEMPORAL_PORT" --mode "$mode" --local "$local" \
			--concurrency "$CONCURRENCY" --duration "$DURATION" --warmup "$WARMUP" --drain-timeout "$DRAIN_TIMEOUT" \
			$(cpu_flags) --json "$out.json" >"$out.txt" 2>&1 || rc=$?
		sleep 11 # as the fixed phase: Temporal's backends publish their counters when idle
		pg_backend_cpu "$out.pgcpu-after.tsv"
		[[ ${TEMPORAL_PG:-} != private ]] || pg_statements "$out.statements.tsv"
		;;
	accept)
		start_mailhook "$name" serve --worker=false
		local http=$MH_PID
		# shellcheck disable=SC2046
		loadtest "$out" --mix postscale=1 --dup-share 0 --out-of-order 0.3 --mailhook-pid "$http" \
			$(cpu_flags --cpu "mailhook=$http") &
		local lt=$!
		# The worker starts once the send phase is over: it drains, unmeasured.
		sleep $(($(secs "$DURATION") + 1))
		"$MHBIN" worker --config "$MHCONFIG" 2>"$WORK/$name-worker.log" &
		local wk=$!
		STARTED+=("$wk")
		wait "$lt" || rc=$?
		stop_pid "$wk"
		stop_pid "$http"
		;;
	e2e)
		start_mailhook "$name" serve
		# shellcheck disable=SC2046
		loadtest "$out" --mix postscale=1 --dup-share 0 --out-of-order 0.3 --mailhook-pid "$MH_PID" "${pgstats[@]}" \
			$(cpu_flags --cpu "mailhook=$MH_PID") || rc=$?
		stop_pid "$MH_PID"
		;;
	pgbench)
		fresh_db "${DB}_pgbench"
		# The row mailhook's acceptance writes for a Postscale event: same columns, similar sizes,
		# a fresh id each time (every insert is new, as in an accept run).
		cat >"$WORK/pgbench-insert.sql" <<'SQL'
\set n random(1, 1000000000)
INSERT INTO webhook_events (provider, event_id, event_type, message_id, occurred_at, payload, normalized, awaiting_start)
VALUES ('postscale', 'evt_' || :client_id || '_' || :n || '_' || md5(random()::text), 'email.delivered', 'msg_' || :n, now(),
  '{"id":"evt_0123456789","type":"email.delivered","created_at":"2026-11-30T00:00:00Z","data":{"email_id":"msg_0123456789","to":"user@example.com","from":"app@example.com","subject":"Welcome"}}',
  '{"provider":"postscale","event_id":"evt_0123456789","type":"email.delivered","kind":"status","status":"delivered","message_id":"msg_0123456789","recipient":"user@example.com","occurred_at":"2026-11-30T00:00:00Z"}',
  true)
ON CONFLICT (provider, event_id) DO NOTHING;
SQL
		local load_start
		load_start=$(cut -d' ' -f1-3 /proc/loadavg)
		pgbench -n -M prepared -c "$CONCURRENCY" -j 2 -T "$(secs "$DURATION")" -f "$WORK/pgbench-insert.sql" \
			"$PG/${DB}_pgbench?sslmode=disable" >"$out.txt" 2>&1 || rc=$?
		python3 - "$out.txt" "$out.json" "$load_start" <<'PY' || rc=$?
import json, re, sys
txt = open(sys.argv[1]).read()
tps = float(re.search(r"tps = ([0-9.]+) \(without initial connection time\)", txt).group(1))
lat = float(re.search(r"latency average = ([0-9.]+) ms", txt).group(1))
json.dump({"inserts_per_sec": tps, "latency_avg_ms": lat, "loadavg_start": sys.argv[3]}, open(sys.argv[2], "w"))
PY
		;;
	accept-nodrain | accept-2000)
		fresh_db "$DB"
		# The runs it starts are never worked: on a queue of their own, so that a processing
		# phase after it on the same Temporal server (ROTATE, REFS) does not work them inside
		# its own measurement (seen: 1.17 starts and 1.32 workflow tasks per event).
		MAILHOOK_BENCH_TASK_QUEUE=mailhook-bench-nodrain start_mailhook "$name" serve --worker=false
		local flags=(--concurrency "$CONCURRENCY")
		[[ $name == accept-2000 ]] && flags=(--rate "$INBOX_RATE" --max-inflight 4000)
		# shellcheck disable=SC2046
		# Throughput with new events only (as pgbench inserts new rows); latency with 10%
		# re-sends, half of them concurrent with their original.
		local dup=0
		[[ $name == accept-2000 ]] && dup=0.1
		loadtest "$out" --mix postscale=1 --dup-share "$dup" --out-of-order 0.3 --no-drain "${flags[@]}" \
			--mailhook-pid "$MH_PID" $(cpu_flags --cpu "mailhook=$MH_PID") || rc=$?
		((${#FLOOD[@]} == 0)) || rejections_kept "$out"
		stop_pid "$MH_PID"
		;;
	accept-ir)
		command -v valgrind >/dev/null && command -v callgrind_control >/dev/null || die "accept-ir needs valgrind (callgrind)"
		pgo pg_ctl -D "$WORK/pgo/data" status >/dev/null 2>&1 || start_private_pg
		local PG=postgres://postgres@127.0.0.1:$PGO_PORT
		sed "s#^  url: .*/$DB?sslmode=disable#  url: $PG/$DB?sslmode=disable#" "$MHCONFIG" >"$WORK/config-$name.yaml"
		local MHCONFIG=$WORK/config-$name.yaml
		fresh_db "$DB"
		[[ $mods != *" noidx "* ]] || psql "$PG/$DB" -qc "DROP INDEX IF EXISTS webhook_events_provider_received_idx,
			webhook_events_type_received_idx, webhook_events_message_idx" >/dev/null
		psql "$PG/$DB" -qc "CHECKPOINT" >/dev/null
		rm -f "$out".callgrind.*
		# Asynchronous preemption is a signal every 10 ms of running time: under callgrind's
		# slower clock that is many more of them than natively, each a signal frame to count.
		GODEBUG=asyncpreemptoff=1 MAILHOOK_BENCH_TASK_QUEUE=mailhook-bench-nodrain MAILHOOK_EAGER_START=$EAGER \
			valgrind --tool=callgrind --callgrind-out-file="$out.callgrind.%p" \
			"$MHBIN" serve --worker=false --config "$MHCONFIG" 2>"$WORK/$name.log" &
		MH_PID=$!
		STARTED+=("$MH_PID")
		for _ in $(seq 600); do
			curl -fsS "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 && break
			sleep 0.2
		done
		curl -fsS "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 || die "mailhook under callgrind did not become ready (see $WORK/$name.log)"
		local postmaster
		postmaster=$(head -1 "$WORK/pgo/data/postmaster.pid")
		loadtest "$out.warmup" --mix postscale=1 --dup-share 0 --out-of-order 0.3 --no-drain --events "$IR_WARMUP" \
			--duration 10m --warmup 0s --concurrency "$IR_CONCURRENCY" || rc=$?
		callgrind_control -z "$MH_PID" >/dev/null || die "callgrind_control -z failed"
		# No /metrics scrape inside the count (a scrape under callgrind is some 20 M
		# instructions, more for a tree with more metrics): the generator's goes nowhere.
		loadtest "$out" --mix postscale=1 --dup-share 0 --out-of-order 0.3 --no-drain --events "$IR_EVENTS" \
			--duration 10m --warmup 0s --concurrency "$IR_CONCURRENCY" --mailhook-pid "$MH_PID" \
			--metrics-url "http://127.0.0.1:$((HTTP_PORT + 1))/metrics" \
			--cpu "mailhook=$MH_PID" --cpu "pg-mailhook=tree:$postmaster" || rc=$?
		callgrind_control -d "$MH_PID" >/dev/null || die "callgrind_control -d failed"
		# The dump's summary line: every instruction the process executed since the zeroing.
		awk '/^summary:/ {print $2}' "$out.callgrind.$MH_PID".* >"$out.ir" 2>/dev/null
		stop_pid "$MH_PID"
		;;
	accept-cpu)
		[[ ${TEMPORAL_PG:-} != private ]] || die "accept-cpu keeps its own cluster for mailhook alone: unset TEMPORAL_PG"
		# mailhook's database alone on a cluster of the bench's own: that cluster's CPU is what
		# the accept path costs PostgreSQL, apart from Temporal's persistence and other work on
		# the shared server.
		pgo pg_ctl -D "$WORK/pgo/data" status >/dev/null 2>&1 || start_private_pg
		local PG=postgres://postgres@127.0.0.1:$PGO_PORT
		sed "s#^  url: .*/$DB?sslmode=disable#  url: $PG/$DB?sslmode=disable#" "$MHCONFIG" >"$WORK/config-$name.yaml"
		local MHCONFIG=$WORK/config-$name.yaml
		fresh_db "$DB"
		[[ $mods != *" noidx "* ]] || psql "$PG/$DB" -qc "DROP INDEX IF EXISTS webhook_events_provider_received_idx,
			webhook_events_type_received_idx, webhook_events_message_idx" >/dev/null
		psql "$PG/$DB" -qc "CHECKPOINT" >/dev/null
		MAILHOOK_BENCH_TASK_QUEUE=mailhook-bench-nodrain start_mailhook "$name" serve --worker=false
		local postmaster
		postmaster=$(head -1 "$WORK/pgo/data/postmaster.pid")
		temporal_backends "$out.tpg-before.tsv"
		# What PostgreSQL wrote (the cluster holds mailhook's database alone): counts, not time.
		psql "$PG/postgres" -AtF$'\t' -c "SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal" >"$out.wal-before.tsv"
		# shellcheck disable=SC2046
		loadtest "$out" --mix postscale=1 --dup-share 0 --out-of-order 0.3 --no-drain --events "$CPU_EVENTS" \
			--duration 10m --warmup 0s --mailhook-pid "$MH_PID" \
			--cpu "mailhook=$MH_PID" --cpu "pg-mailhook=tree:$postmaster" --cpu "temporal=tree:$TEMPORAL_PID" || rc=$?
		psql "$PG/postgres" -AtF$'\t' -c "SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal" >"$out.wal-after.tsv"
		temporal_backends "$out.tpg-after.tsv"
		stop_pid "$MH_PID"
		;;
	burst | burst-small)
		fresh_db "$DB"
		start_mailhook "$name" serve
		local events=$BURST
		[[ $name == *-small ]] && events=$BURST_SMALL
		# shellcheck disable=SC2046
		loadtest "$out" --mix postscale=1 --dup-share 0 --out-of-order 0.3 --events "$events" --duration 60m \
			--warmup 0s --drain-timeout "$BURST_DRAIN_TIMEOUT" --mailhook-pid "$MH_PID" \
			$(cpu_flags --cpu "mailhook=$MH_PID") || rc=$?
		stop_pid "$MH_PID"
		;;
	outage)
		[[ $TEMPORAL == server ]] || die "the outage phase needs TEMPORAL=server (the dev server forgets its workflows when stopped)"
		start_mailhook "$name" serve
		(
			sleep 30
			log "outage: stopping Temporal for ${OUTAGE}s"
			TEMPORAL_SERVER_PORT=$TEMPORAL_PORT TEMPORAL_SERVER_STATE=$WORK/temporal-server \
				"$ROOT/scripts/temporal-server.sh" stop 2>>"$WORK/temporal.log"
			sleep "$OUTAGE"
			TEMPORAL_SERVER_PORT=$TEMPORAL_PORT TEMPORAL_SERVER_STATE=$WORK/temporal-server TEMPORAL_CLI=$TEMPORAL_CLI \
				"$ROOT/scripts/temporal-server.sh" restart >/dev/null 2>>"$WORK/temporal.log"
			log "outage: Temporal is back"
		) &
		local outage=$!
		# shellcheck disable=SC2046
		loadtest "$out" --mix postscale=3,sendgrid=1 --dup-share 0.2 --dup-concurrent 0.5 --out-of-order 0.3 \
			--max-batch 10 --duration "$OUTAGE_LOAD" --rate "$OUTAGE_RATE" --mailhook-pid "$MH_PID" || rc=$?
		wait "$outage" || true
		TEMPORAL_PID=$(cat "$WORK/temporal-server/server.pid")
		STARTED+=("$TEMPORAL_PID")
		stop_pid "$MH_PID"
		;;
	pg-outage | pg-flap)
		[[ $TEMPORAL == server ]] || die "the $name phase needs TEMPORAL=server"
		start_private_pg
		local PG=postgres://postgres@127.0.0.1:$PGO_PORT
		sed "s#^  url: .*/$DB?sslmode=disable#  url: $PG/$DB?sslmode=disable#" "$MHCONFIG" >"$WORK/config-$name.yaml"
		local MHCONFIG=$WORK/config-$name.yaml
		fresh_db "$DB"
		start_mailhook "$name" serve
		(
			sleep 30
			local stops=1 down=$PG_OUTAGE
			[[ $name == pg-flap ]] && stops=3 down=$((PG_OUTAGE / 3 - 10))
			for i in $(seq "$stops"); do
				log "$name: stopping PostgreSQL ($i of $stops) for ${down}s"
				stop_private_pg immediate
				sleep "$down"
				start_private_pg
				log "$name: PostgreSQL is back"
				((i < stops)) && sleep 15
			done
		) &
		local pgout=$!
		# shellcheck disable=SC2046
		loadtest "$out" --mix postscale=3,sendgrid=1 --dup-share 0.2 --dup-concurrent 0.5 --out-of-order 0.3 \
			--max-batch 10 --duration "$PG_OUTAGE_LOAD" --rate "$OUTAGE_RATE" --mailhook-pid "$MH_PID" || rc=$?
		wait "$pgout" || true
		curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | grep -E '^mailhook_(events_accepted_through_temporal_total|webhook_requests_total)' >"$out.metrics" || true
		stop_pid "$MH_PID"
		stop_private_pg
		;;
	sizing)
		[[ $TEMPORAL == server ]] || die "the sizing phase needs TEMPORAL=server (the dev server flatters, and counts no actions)"
		pgo pg_ctl -D "$WORK/pgo/data" status >/dev/null 2>&1 || start_private_pg
		local PG=postgres://postgres@127.0.0.1:$PGO_PORT
		psql "$PG/postgres" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" \
			-c "DO \$\$ BEGIN CREATE ROLE mailhook_bench LOGIN SUPERUSER; EXCEPTION WHEN duplicate_object THEN END \$\$" >/dev/null
		sed "s#^  url: .*/$DB?sslmode=disable#  url: postgres://mailhook_bench@127.0.0.1:$PGO_PORT/$DB?sslmode=disable#" \
			"$MHCONFIG" >"$WORK/config-sizing.yaml"
		local MHCONFIG=$WORK/config-sizing.yaml
		fresh_db "$DB"
		relation_sizes "$PG/$DB" "$out.tables-before.tsv"
		start_mailhook "$name" serve --worker=false
		local http=$MH_PID
		MAILHOOK_METRICS_ADDRESS=127.0.0.1:$WORKER_METRICS_PORT "$MHBIN" worker --config "$MHCONFIG" 2>"$WORK/$name-worker.log" &
		local wk=$!
		STARTED+=("$wk")
		for _ in $(seq 100); do
			curl -fsS "http://127.0.0.1:$WORKER_METRICS_PORT/healthz" >/dev/null 2>&1 && break
			sleep 0.2
		done
		local tmetrics=http://127.0.0.1:$TEMPORAL_METRICS_PORT/metrics wmetrics=http://127.0.0.1:$WORKER_METRICS_PORT/metrics
		curl -fsS "$tmetrics" >"$out.temporal-before.prom" || die "no Temporal server metrics at $tmetrics"
		curl -fsS "$wmetrics" >"$out.worker-before.prom" || die "no worker metrics at $wmetrics"
		local postmaster
		postmaster=$(head -1 "$WORK/pgo/data/postmaster.pid")
		# shellcheck disable=SC2046
		loadtest "$out" --mix postscale=3,sendgrid=1 --dup-share 0.2 --dup-concurrent 0.5 --out-of-order 0.3 \
			--max-batch 10 --events "$SIZING_EVENTS" --seed "$SIZING_SEED" --duration 10m --warmup 0s --mailhook-pid "$http" \
			--worker-metrics-url "$wmetrics" --pg-stats-role mailhook_bench \
			--cpu "temporal=$TEMPORAL_PID" --cpu "http=$http" --cpu "worker=$wk" --cpu "postgres=tree:$postmaster" || rc=$?
		curl -fsS "$tmetrics" >"$out.temporal-after.prom" || true
		curl -fsS "$wmetrics" >"$out.worker-after.prom" || true
		relation_sizes "$PG/$DB" "$out.tables-after.tsv"
		grep -E '^Vm(HWM|RSS)' "/proc/$wk/status" >"$out.worker-memory" 2>/dev/null || true
		git -C "$ROOT" rev-parse --short HEAD >"$out.tree"
		stop_pid "$wk"
		stop_pid "$http"
		;;
	fixed)
		start_mailhook "$name" serve
		local pgcpu=()
		if ((${#pgstats[@]})); then # mailhook's own cluster apart from the shared one (Temporal's)
			pgcpu=(--cpu "pg-mailhook=tree:$(head -1 "$WORK/pgo/data/postmaster.pid")")
		fi
		pg_databases "$out.pgdb-before.tsv"
		pg_tables "$PG/$DB" "$out.tables-before.tsv"
		pg_backend_cpu "$out.pgcpu-before.tsv"
		((${#pgstats[@]} == 0)) || psql "$PG/postgres" -qAtc "SELECT pg_stat_statements_reset()" >/dev/null
		# shellcheck disable=SC2046
		loadtest "$out" --mix postscale=3,sendgrid=1 --dup-share 0.2 --dup-concurrent 0.5 --out-of-order 0.3 \
			--max-batch 10 --events "$FIXED_EVENTS" --duration 10m --warmup 0s --mailhook-pid "$MH_PID" "${pgstats[@]}" \
			${FIXED_RATE:+--rate "$FIXED_RATE"} $(cpu_flags --cpu "mailhook=$MH_PID") "${pgcpu[@]}" || rc=$?
		pg_backend_cpu "$out.pgcpu-after.tsv"
		stop_pid "$MH_PID"
		sleep 11 # Temporal's backends publish their counters within 10 s of going idle
		pg_databases "$out.pgdb-after.tsv"
		pg_tables "$PG/$DB" "$out.tables-after.tsv"
		((${#pgstats[@]} == 0)) || pg_statements "$out.statements.tsv"
		;;
	mixed)
		start_mailhook "$name" serve
		# shellcheck disable=SC2046
		loadtest "$out" --mix postscale=3,sendgrid=1 --dup-share 0.2 --dup-concurrent 0.5 --out-of-order 0.3 \
			--max-batch 10 --dup-probe 500 --dup-probe-concurrency 10 --mailhook-pid "$MH_PID" "${pgstats[@]}" \
			$(cpu_flags --cpu "mailhook=$MH_PID") || rc=$?
		stop_pid "$MH_PID"
		;;
	*) die "unknown phase $name" ;;
	esac
	if ((rc != 0)); then
		log "run $run: $name exited $rc (see $out.txt)"
		echo "$name run $run exited $rc" >>"$RESULTS/failures.txt"
	fi
	tail -n 3 "$out.txt" | sed 's/^/    /' >&2
}

summary() {
	python3 - "$RESULTS" <<'PY'
import glob, json, os, re, statistics, sys
d = sys.argv[1]
runs = {}
for p in sorted(glob.glob(os.path.join(d, "run*-*.json"))):
    m = re.match(r"run(\d+)-(.+)\.json", os.path.basename(p))
    runs.setdefault(m.group(2), {})[int(m.group(1))] = json.load(open(p))
def ms(ns): return ns / 1e6
rows = []  # (metric, phase, getter, fmt)
def one(metric, phase, get, fmt):
    vals = []
    for r, j in sorted(runs.get(phase, {}).items()):
        try:
            v = get(j)
        except (KeyError, TypeError, ZeroDivisionError):
            v = None
        vals.append(v)
    got = [v for v in vals if v is not None]
    med = statistics.median(got) if got else None
    rows.append((metric, phase, med, vals, fmt))
    return med
def median_of(phase, get):
    got = []
    for j in runs.get(phase, {}).values():
        try:
            got.append(get(j))
        except (KeyError, TypeError, ZeroDivisionError):
            pass
    return statistics.median(got) if got else None
def add(metric, phase, get, fmt="{:.1f}"):
    """A row for phase, and right after it one for each variant that ran (+eager, @prev, @base,
    then the REFS aliases in PHASES order)."""
    med = one(metric, phase, get, fmt)
    fixed = (phase + "+eager", phase + "@prev", phase + "@prev+eager", phase + "@base", phase + "@base+eager",
             phase + "+flood", phase + "+flood+norecord", phase + "@base+flood", phase + "@base+flood+norecord")
    aliases = [p for p in os.environ.get("PHASES", "").split() if p.startswith(phase + "@") and p not in fixed]
    for other in fixed + tuple(aliases):
        if other in runs:
            one(metric, other, get, fmt)
    return med

bs = add("start rate (starts/s)", "baseline-start", lambda j: j["starts_per_sec"])
bs99 = add("start p99 (ms)", "baseline-start", lambda j: ms(j["start_latency"]["p99_ns"]))
add("start p50 (ms)", "baseline-start", lambda j: ms(j["start_latency"]["p50_ns"]))
ac = add("accept rate (events/s)", "accept", lambda j: j["events_accepted_per_sec"])
ac99 = add("accept p99 (ms)", "accept", lambda j: ms(j["latency"]["postscale/accepted"]["p99_ns"]))
add("accept p50 (ms)", "accept", lambda j: ms(j["latency"]["postscale/accepted"]["p50_ns"]))
add("accept mean, client (ms)", "accept", lambda j: ms(j["latency"]["postscale/accepted"]["mean_ns"]))
add("handler mean, mailhook /metrics (ms)", "accept", lambda j: ms(j["server_latency_mean_ns"]["handler postscale/accepted"]))
add("StartWorkflowExecution mean, SDK (ms)", "accept", lambda j: ms(j["server_latency_mean_ns"]["sdk StartWorkflowExecution"]))
add("start mean (ms)", "baseline-start", lambda j: ms(j["start_latency"]["mean_ns"]))
bc = add("completion rate, overall (wf/s)", "baseline-complete", lambda j: j["completed_per_sec_overall"])
add("completion rate, in window (wf/s)", "baseline-complete", lambda j: j["completed_per_sec_in_window"])
add("start rate with worker (starts/s)", "baseline-complete", lambda j: j["starts_per_sec"])
e2 = add("processed rate, overall (events/s)", "e2e", lambda j: j["processed_per_sec_overall"])
add("processed rate, in window (events/s)", "e2e", lambda j: j["processed_per_sec_in_window"])
add("accept rate with worker (events/s)", "e2e", lambda j: j["events_accepted_per_sec"])
add("accept p99 with worker (ms)", "e2e", lambda j: ms(j["latency"]["postscale/accepted"]["p99_ns"]))
add("peak RSS serve (MB)", "e2e", lambda j: j["mailhook_memory"]["peak_rss_bytes"] / 2**20)
bl = add("completion rate, overall (wf/s)", "baseline-local", lambda j: j["completed_per_sec_overall"])
add("completion rate, in window (wf/s)", "baseline-local", lambda j: j["completed_per_sec_in_window"])
ba = add("completion rate, overall (wf/s)", "baseline-local-all", lambda j: j["completed_per_sec_overall"])
add("processed rate, overall (events/s)", "mixed", lambda j: j["processed_per_sec_overall"])
add("accept p99, postscale (ms)", "mixed", lambda j: ms(j["latency"]["postscale/accepted"]["p99_ns"]))
add("duplicate p99 under load (ms)", "mixed", lambda j: ms(j["latency"]["postscale/duplicate"]["p99_ns"]))
dp1 = add("duplicate p99, idle probe, 1 at a time (ms)", "mixed", lambda j: ms(j["dup_probe_sequential"]["latency"]["p99_ns"]))
add("duplicate p50, idle probe, 1 at a time (ms)", "mixed", lambda j: ms(j["dup_probe_sequential"]["latency"]["p50_ns"]))
add("  handler mean (ms)", "mixed", lambda j: ms(j["dup_probe_sequential"]["server_latency_mean_ns"]["handler postscale/duplicate"]))
add("  StartWorkflowExecution mean (ms)", "mixed", lambda j: ms(j["dup_probe_sequential"]["server_latency_mean_ns"]["sdk StartWorkflowExecution"]))
dp = add("duplicate p99, idle probe, 10 at once (ms)", "mixed", lambda j: ms(j["dup_probe"]["latency"]["p99_ns"]))
add("duplicate p50, idle probe, 10 at once (ms)", "mixed", lambda j: ms(j["dup_probe"]["latency"]["p50_ns"]))
add("load average during the probe (1 min)", "mixed", lambda j: float(j["dup_probe"]["loadavg"].split()[0]), "{:.2f}")
add("StartWorkflowExecution per duplicate", "mixed", lambda j: j["dup_probe"]["starts_per_duplicate"], "{:.3f}")
add("Temporal client calls per duplicate", "mixed", lambda j: j["dup_probe"]["client_calls_per_duplicate"], "{:.3f}")
rss = add("peak RSS serve (MB)", "mixed", lambda j: j["mailhook_memory"]["peak_rss_bytes"] / 2**20)
add("verdict passed (1=yes)", "mixed", lambda j: 1 if j["passed"] else 0, "{:.0f}")
for ph in ["e2e", "mixed"]:
    add("starts per accepted event", ph, lambda j: j["per_event"]["starts"], "{:.2f}")
    add("workflow tasks per accepted event", ph, lambda j: j["per_event"]["workflow_tasks"], "{:.2f}")
    add("activity tasks per accepted event", ph, lambda j: j["per_event"]["activity_tasks"], "{:.2f}")
    add("notifications per accepted event", ph, lambda j: j["notifications"]["expected"] / j["events_accepted"], "{:.2f}")
    add("history bytes per run (sample mean)", ph, lambda j: j["per_event"]["history_bytes"], "{:.0f}")
    add("history bytes, largest sampled run", ph, lambda j: j["per_event"]["history_bytes_max"], "{:.0f}")
for ph in ["e2e", "mixed", "fixed"]:
    add("PG statements per accepted event", ph, lambda j: j["pg"]["per_event"]["statements"], "{:.2f}")
    add("PG round trips per accepted event", ph, lambda j: j["pg"]["per_event"]["round_trips"], "{:.2f}")
    add("PG rows written per accepted event", ph, lambda j: j["pg"]["per_event"]["rows_written"], "{:.2f}")
    add("PG WAL bytes per accepted event", ph, lambda j: j["pg"]["per_event"]["wal_bytes"], "{:.0f}")
add("verdict passed (1=yes)", "e2e", lambda j: 1 if j["passed"] else 0, "{:.0f}")
add("verdict passed (1=yes)", "accept", lambda j: 1 if j["passed"] else 0, "{:.0f}")
pg = add("INSERT … ON CONFLICT rate (rows/s)", "pgbench", lambda j: j["inserts_per_sec"])
add("INSERT latency avg (ms)", "pgbench", lambda j: j["latency_avg_ms"], "{:.2f}")
ia = add("accept rate (events/s)", "accept-nodrain", lambda j: j["events_accepted_per_sec"])
add("requests/s", "accept-nodrain", lambda j: j["requests_per_sec"])
add("accept p99 (ms)", "accept-nodrain", lambda j: ms(j["latency"]["postscale/accepted"]["p99_ns"]), "{:.2f}")
add("accept p50 (ms)", "accept-nodrain", lambda j: ms(j["latency"]["postscale/accepted"]["p50_ns"]), "{:.2f}")
add("duplicate p99 (ms)", "accept-nodrain", lambda j: ms(j["latency"]["postscale/duplicate"]["p99_ns"]), "{:.2f}")
five = lambda j: sum(n for k, n in j["codes"].items() if k.startswith("5") or k == "transport error")
add("5xx or no answer", "accept-nodrain", five, "{:.0f}")
add("verdict passed (1=yes)", "accept-nodrain", lambda j: 1 if j["passed"] else 0, "{:.0f}")
add("requests/s achieved", "accept-2000", lambda j: j["requests_per_sec"])
i99 = add("accept p99 (ms)", "accept-2000", lambda j: ms(j["latency"]["postscale/accepted"]["p99_ns"]), "{:.2f}")
add("accept p50 (ms)", "accept-2000", lambda j: ms(j["latency"]["postscale/accepted"]["p50_ns"]), "{:.2f}")
add("duplicate p99 (ms)", "accept-2000", lambda j: ms(j["latency"]["postscale/duplicate"]["p99_ns"]), "{:.2f}")
add("skipped (max in flight)", "accept-2000", lambda j: j["skipped"], "{:.0f}")
add("5xx or no answer", "accept-2000", five, "{:.0f}")
add("verdict passed (1=yes)", "accept-2000", lambda j: 1 if j["passed"] else 0, "{:.0f}")
# +flood phases: the flood, and what the rejected-request recorder kept of it (rejections_kept).
kept = {}
for p in glob.glob(os.path.join(d, "run*-*.rejections.json")):
    m = re.match(r"run(\d+)-(.+)\.rejections\.json", os.path.basename(p))
    try:
        kept.setdefault(m.group(2), {})[int(m.group(1))] = json.load(open(p))
    except ValueError:
        pass
for ph in ["accept-nodrain+flood", "accept-nodrain+flood+norecord", "accept-nodrain@base+flood", "accept-nodrain@base+flood+norecord"]:
    if ph not in runs:
        continue
    one("flood requests/s sent", ph, lambda j: j["flood"]["sent_per_sec"], "{:.0f}")
    one("flood answered 401", ph, lambda j: j["flood"]["answers"].get("401", 0), "{:.0f}")
    one("flood skipped (512 in flight)", ph, lambda j: j["flood"]["skipped"], "{:.0f}")
    for r in runs[ph]:
        runs[ph][r]["_kept"] = kept.get(ph, {}).get(r, {})
    one("rejections kept, rows (budget 1,000/h)", ph, lambda j: sum(e["rows"] for e in j["_kept"]["kept"].values()), "{:.0f}")
    one("rejections kept, bytes est. (budget 16 MiB/h)", ph, lambda j: sum(e["table_bytes_est"] for e in j["_kept"]["kept"].values()), "{:.0f}")
    one("rejected_requests table bytes", ph, lambda j: j["_kept"]["table_bytes"], "{:.0f}")
    one("counted as dropped", ph, lambda j: j["_kept"]["dropped"], "{:.0f}")
    one("not-kept counter", ph, lambda j: j["_kept"]["not_kept_metric"], "{:.0f}")
if "accept-nodrain" in runs:
    add("peak RSS serve (MB)", "accept-nodrain", lambda j: j["mailhook_memory"]["peak_rss_bytes"] / 2**20)
    # CPU per accepted event moves less with the machine's load than the rate does; with a flood
    # it includes the flood's cost.
    add("mailhook CPU µs per accepted event", "accept-nodrain", lambda j: 1e6 * j["cpu_cores_window"]["mailhook"] / j["events_accepted_per_sec"], "{:.0f}")
# accept-cpu: CPU time per accepted event by process group (µs), and the trees side by side by it.
def tpg(phase, r):
    """CPU seconds of the Temporal server's backends on the shared PostgreSQL over the phase."""
    def ticks(which):
        out = {}
        for line in open(os.path.join(d, f"run{r}-{phase}.tpg-{which}.tsv")):
            pid, t = line.split()
            out[pid] = int(t)
        return out
    b, a = ticks("before"), ticks("after")
    return sum(t - b[p] if p in b and t >= b[p] else t for p, t in a.items()) / 100
cpu_phases = [p for p in os.environ.get("PHASES", "").split() if p == "accept-cpu" or p.startswith("accept-cpu@")]
cpu_phases = [p for p in dict.fromkeys(cpu_phases + sorted(p for p in runs if p == "accept-cpu" or p.startswith("accept-cpu@"))) if p in runs]
for ph in cpu_phases:
    for r, j in runs[ph].items():
        c = j.get("cpu_seconds_window") or {}
        try:
            c["temporal-pg"] = tpg(ph, r)
        except (OSError, ValueError, KeyError):
            pass
        n = j.get("events_accepted") or 0
        if n:
            j["_us"] = {k: 1e6 * v / n for k, v in c.items()}
            u = j["_us"]
            u["serve+pg"] = u.get("mailhook", 0) + u.get("pg-mailhook", 0)
            u["all"] = sum(u.get(k, 0) for k in ("mailhook", "pg-mailhook", "temporal", "temporal-pg", "self"))
            # The same machine state slows every process of the phase alike (other work, a vCPU
            # the host preempts: no steal time is accounted here); the generator's work per event
            # is the same for every tree, so serve + PostgreSQL in units of it cancels that.
            if u.get("self"):
                u["per-gen"] = u["serve+pg"] / u["self"]
            try:
                wb = [float(x) for x in open(os.path.join(d, f"run{r}-{ph}.wal-before.tsv")).read().split()]
                wa = [float(x) for x in open(os.path.join(d, f"run{r}-{ph}.wal-after.tsv")).read().split()]
                u["wal-records"], u["wal-bytes"] = (wa[0] - wb[0]) / n * 1e6, (wa[2] - wb[2]) / n * 1e6
            except (OSError, ValueError, IndexError):
                pass
            # What else kept the machine busy meanwhile (other work), in cores.
            w = j.get("window_seconds") or 0
            if w and "machine" in c:
                u["others"] = max(0.0, c["machine"] - sum(c.get(k, 0) for k in ("mailhook", "pg-mailhook", "temporal", "temporal-pg", "self"))) / w
for metric, key in [("events accepted", None), ("accept rate (events/s)", "rate"),
                    ("CPU µs per accepted event: serve", "mailhook"), ("  its PostgreSQL cluster", "pg-mailhook"),
                    ("  serve + its PostgreSQL", "serve+pg"), ("  Temporal server", "temporal"),
                    ("  Temporal's backends (shared server)", "temporal-pg"), ("  load generator", "self"),
                    ("  all of these", "all"), ("serve + PostgreSQL / load generator", "per-gen"),
                    ("WAL records per accepted event", "wal-records"), ("WAL bytes per accepted event", "wal-bytes"),
                    ("other work on the machine meanwhile (cores)", "others"),
                    ("load average at start (1 min)", "load")]:
    for ph in cpu_phases:
        if key is None:
            one(metric, ph, lambda j: j["events_accepted"], "{:.0f}")
        elif key == "rate":
            one(metric, ph, lambda j: j["events_accepted_per_sec"], "{:.0f}")
        elif key == "load":
            one(metric, ph, lambda j: float(j["loadavg_start"].split()[0]), "{:.2f}")
        else:
            one(metric, ph, lambda j, k=key: j["_us"][k] / (1e6 if k.startswith("wal") else 1),
                "{:.2f}" if key == "others" else "{:.3f}" if key == "per-gen" else "{:.1f}")
def cpu_pairs():
    """Serve + its PostgreSQL per event, each pair of trees run by run (same run: side by side)."""
    for i, a in enumerate(cpu_phases):
        for b in cpu_phases[i + 1:]:
            rs = [r for r in sorted(runs[a]) if r in runs[b] and "_us" in runs[a][r] and "_us" in runs[b][r]]
            for key, what in [("serve+pg", "serve + PostgreSQL CPU per event"), ("per-gen", "the same in load generator units"),
                              ("all", "all measured CPU per event")]:
                q = [runs[a][r]["_us"][key] / runs[b][r]["_us"][key] for r in rs if key in runs[a][r]["_us"] and key in runs[b][r]["_us"]]
                if not q:
                    continue
                print(f"- {a} / {b}, {what}, run by run: {', '.join(f'{x:.3f}' for x in q)} "
                      f"(median {statistics.median(q):.3f}, range {min(q):.3f}–{max(q):.3f})")
            q = [runs[a][r]["events_accepted_per_sec"] / runs[b][r]["events_accepted_per_sec"] for r in rs]
            if q:
                print(f"- {a} / {b}, accept rate, run by run: {', '.join(f'{x:.2f}' for x in q)} (median {statistics.median(q):.2f})")
# accept-ir: serve's instructions per accepted event (callgrind), and the trees side by side by it.
ir_phases = [p for p in os.environ.get("PHASES", "").split() if p == "accept-ir" or p.startswith("accept-ir@")]
ir_phases = [p for p in dict.fromkeys(ir_phases + sorted(p for p in runs if p == "accept-ir" or p.startswith("accept-ir@")))
             if p in runs and not p.endswith(".warmup")]
for ph in ir_phases:
    for r, j in runs[ph].items():
        try:
            j["_ir"] = float(open(os.path.join(d, f"run{r}-{ph}.ir")).read().split()[0]) / j["events_accepted"]
        except (OSError, ValueError, IndexError, KeyError, ZeroDivisionError):
            pass
        c, n = j.get("cpu_seconds_window") or {}, j.get("events_accepted") or 0
        if n and "pg-mailhook" in c:
            j["_pgus"] = 1e6 * c["pg-mailhook"] / n
for metric, get, fmt in [("events accepted", lambda j: j["events_accepted"], "{:.0f}"),
                         ("serve instructions per accepted event (callgrind)", lambda j: j["_ir"], "{:,.0f}"),
                         ("its PostgreSQL cluster, CPU µs per accepted event", lambda j: j["_pgus"], "{:.1f}"),
                         ("accept rate under callgrind (events/s)", lambda j: j["events_accepted_per_sec"], "{:.0f}"),
                         ("load average at start (1 min)", lambda j: float(j["loadavg_start"].split()[0]), "{:.2f}")]:
    for ph in ir_phases:
        one(metric, ph, get, fmt)
def ir_pairs():
    for i, a in enumerate(ir_phases):
        for b in ir_phases[i + 1:]:
            for key, what in [("_ir", "serve instructions per event"), ("_pgus", "PostgreSQL CPU per event")]:
                rs = [r for r in sorted(runs[a]) if r in runs[b] and key in runs[a][r] and key in runs[b][r]]
                if rs:
                    q = [runs[a][r][key] / runs[b][r][key] for r in rs]
                    print(f"- {a} / {b}, {what}, run by run: {', '.join(f'{x:.3f}' for x in q)} "
                          f"(median {statistics.median(q):.3f}, range {min(q):.3f}–{max(q):.3f})")
def burst(phase, full):
    """Rows of a burst phase; full adds latency, drain time and memory."""
    add("events accepted", phase, lambda j: j["events_accepted"], "{:.0f}")
    add("accept rate (events/s)", phase, lambda j: j["events_accepted_per_sec"])
    if full:
        add("accept p99 (ms)", phase, lambda j: ms(j["latency"]["postscale/accepted"]["p99_ns"]), "{:.2f}")
    add("5xx or no answer", phase, five, "{:.0f}")
    rate = add("processed rate, overall (events/s)", phase, lambda j: j["processed_per_sec_overall"], "{:.2f}")
    if full:
        add("drain after the burst (s)", phase, lambda j: j["drain_seconds"], "{:.0f}")
        add("peak RSS serve (MB)", phase, lambda j: j["mailhook_memory"]["peak_rss_bytes"] / 2**20)
    add("verdict passed (1=yes)", phase, lambda j: 1 if j["passed"] else 0, "{:.0f}")
    return rate
fx = add("processed rate, overall (events/s)", "fixed", lambda j: j["processed_per_sec_overall"], "{:.2f}")
add("events accepted", "fixed", lambda j: j["events_accepted"], "{:.0f}")
add("end to end p50 (ms)", "fixed", lambda j: ms(j["end_to_end"]["p50_ns"]), "{:.0f}")
add("starts per accepted event", "fixed", lambda j: j["per_event"]["starts"], "{:.2f}")
add("workflow tasks per accepted event", "fixed", lambda j: j["per_event"]["workflow_tasks"], "{:.2f}")
add("activity tasks per accepted event", "fixed", lambda j: j["per_event"]["activity_tasks"], "{:.2f}")
add("notifications per accepted event", "fixed", lambda j: j["notifications"]["expected"] / j["events_accepted"], "{:.2f}")
add("history bytes per run (sample mean)", "fixed", lambda j: j["per_event"]["history_bytes"], "{:.0f}")
add("history bytes, largest sampled run", "fixed", lambda j: j["per_event"]["history_bytes_max"], "{:.0f}")
add("verdict passed (1=yes)", "fixed", lambda j: 1 if j["passed"] else 0, "{:.0f}")
add("events accepted", "outage", lambda j: j["events_accepted"], "{:.0f}")
add("5xx or no answer", "outage", five, "{:.0f}")
add("accept p99, postscale (ms)", "outage", lambda j: ms(j["latency"]["postscale/accepted"]["p99_ns"]))
add("duplicate p99 (ms)", "outage", lambda j: ms(j["latency"]["postscale/duplicate"]["p99_ns"]))
add("drain after the load (s)", "outage", lambda j: j["drain_seconds"], "{:.0f}")
add("verdict passed (1=yes)", "outage", lambda j: 1 if j["passed"] else 0, "{:.0f}")
ib = burst("burst", True)
ibs = burst("burst-small", False)
for ph in ["baseline-start", "accept", "baseline-complete", "e2e", "baseline-local", "baseline-local-all", "mixed", "fixed", "pgbench", "accept-nodrain", "accept-2000", "burst", "burst-small"]:
    add("load average at start (1 min)", ph, lambda j: float(j["loadavg_start"].split()[0]), "{:.2f}")
def f(v, fmt): return "—" if v is None else fmt.format(v)
print("| phase | metric | median | runs |")
print("|---|---|---|---|")
for metric, phase, med, vals, fmt in rows:
    print(f"| {phase} | {metric} | {f(med, fmt)} | {', '.join(f(v, fmt) for v in vals)} |")
print()
def ratio(name, a, b, goal, higher=True):
    if a is None or b is None or b == 0:
        print(f"- {name}: n/a"); return
    r = a / b
    ok = r >= goal if higher else r <= goal
    print(f"- {name}: {r:.2f} (goal {'≥' if higher else '≤'} {goal}) → {'met' if ok else 'NOT met'}")
ratio("accept rate / baseline start rate", ac, bs, 0.8)
ratio("accept p99 / baseline start p99", ac99, bs99, 1.5, higher=False)
ratio("e2e processed / baseline completion", e2, bc, 0.7)
if bl and bc: print(f"- local activities (db steps local) / regular: {bl/bc:.2f}×")
if ba and bc: print(f"- local activities (all steps local) / regular: {ba/bc:.2f}×")
if dp1 is not None: print(f"- duplicate p99, idle probe 1 at a time: {dp1:.1f} ms (goal ≤ 50) → {'met' if dp1 <= 50 else 'NOT met'}")
if dp is not None: print(f"- duplicate p99, idle probe 10 at once: {dp:.1f} ms (goal ≤ 50) → {'met' if dp <= 50 else 'NOT met'}")
if rss is not None: print(f"- peak RSS {rss:.1f} MB (goal ≤ 150) → {'met' if rss <= 150 else 'NOT met'}")
ratio("accept rate (no drain) / pgbench INSERT rate", ia, pg, 0.4)
acc = lambda j: j["events_accepted_per_sec"]
ratio("accept rate with the flood kept / with the flood not kept (issue 43)", median_of("accept-nodrain+flood", acc), median_of("accept-nodrain+flood+norecord", acc), 0.95)
ratio("the same on BASE_REF", median_of("accept-nodrain@base+flood", acc), median_of("accept-nodrain@base+flood+norecord", acc), 0.95)
for tree in ["", "@base"]:
    k, n = runs.get("accept-nodrain" + tree + "+flood", {}), runs.get("accept-nodrain" + tree + "+flood+norecord", {})
    pairs = [k[r]["events_accepted_per_sec"] / n[r]["events_accepted_per_sec"] for r in sorted(k) if r in n]
    if pairs:
        print(f"- kept / not kept{' on BASE_REF' if tree else ''}, run by run: {', '.join(f'{p:.2f}' for p in pairs)} (median {statistics.median(pairs):.2f})")
ratio("accept rate with the flood not kept / without a flood", median_of("accept-nodrain+flood+norecord", acc), ia, 0.0)
rate = lambda j: j["processed_per_sec_overall"]
ratio("fixed: processed rate / the same work on BASE_REF", fx, median_of("fixed@base", rate), 3.0)
ratio("fixed: processed rate / baseline --local all", fx, ba, 0.8)
ratio("fixed+eager: processed rate / without eager start", median_of("fixed+eager", rate), fx, 1.0)
ratio("fixed+eager: processed rate / the same work on BASE_REF", median_of("fixed+eager", rate), median_of("fixed@base", rate), 3.0)
ratio("fixed+eager: processed rate / baseline --local all", median_of("fixed+eager", rate), ba, 0.8)
ratio("fixed+eager: processed rate / fixed@base+eager (issue 46)", median_of("fixed+eager", rate), median_of("fixed@base+eager", rate), 1.1)
ratio("fixed: processed rate / the same work on PREV_REF", fx, median_of("fixed@prev", rate), 1.0)
cpu_pairs()
ir_pairs()
if i99 is not None: print(f"- accept p99 at {os.environ.get('INBOX_RATE', '2000')} req/s: {i99:.2f} ms (goal ≤ 25) → {'met' if i99 <= 25 else 'NOT met'}")
PY
}

main() {
	if [[ ${1:-} == summary ]]; then
		summary
		return
	fi
	trap 'cleanup; [[ ${PGSTATS:-} != 1 && " $PHASES " != *" sizing "* && $PHASES != *accept-cpu* && $PHASES != *accept-ir* ]] || stop_private_pg' EXIT
	setup
	for run in $(seq "${START_RUN:-1}" $((${START_RUN:-1} + RUNS - 1))); do
		((run == ${START_RUN:-1})) || [[ $FRESH == phase ]] || start_temporal
		local list n k
		read -ra list <<<"$PHASES"
		n=${#list[@]}
		for ((k = 0; k < n; k++)); do
			phase "$run" "${list[$(((k + (run - 1) * ${ROTATE:-0}) % n))]}"
		done
	done
	summary | tee "$RESULTS/summary.md"
}

main "$@"
