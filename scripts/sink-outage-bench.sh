#!/usr/bin/env bash
# Benchmarks delivery to a failing sink (docs/BENCHMARKS.md): a second sink, `down`, that refuses
# connections or accepts them and never answers, for LOAD under an open-loop load with a healthy
# sink beside it, then recovers; this tree side by side with BASE_REF (per-notification retries
# for 72 h, before per-sink delivery).
# It prints its tables and writes nothing under docs/: record a run as a dated page,
# docs/benchmarks/<date>-<name>.md, and update its figure in docs/BENCHMARKS.md.
#
#   scripts/sink-outage-bench.sh            build, every SCENARIO for every TREE, summary
#   scripts/sink-outage-bench.sh summary    only print the summary of $RESULTS
#
# Per TREE (this: the working tree; base: BASE_REF, built with `git worktree add` into $WORK) and
# SCENARIO, each run on a fresh mailhook database and a fresh Temporal (TEMPORAL=server: the real
# server v1.29.1 with PostgreSQL persistence, scripts/temporal-server.sh; TEMPORAL=dev: the CLI's
# dev server, for a quick smoke run):
#
#   healthy  `down` is a `mailhook-loadtest receiver --mode ok` (the no-outage run)
#   refuse   `down` points at DOWN_PORT with nothing listening (connection refused)
#   hang     `down` is a `receiver --mode hang`: it reads each request and never answers
#
# mailhook serve (HTTP and worker in one process) gets the sinks `loadtest` (the load
# generator's own) and `down`, both with types [message.status_changed, email.received,
# suppression.added]; `down` also gets concurrency CONCURRENCY_DOWN and rate RATE_DOWN, in the
# base tree's config only when its config has the sink's `rate` key (its parser is strict). mailhook-loadtest sends
# RATE requests/s (postscale, 10% re-sends) for LOAD and checks its own sink (its verdict, and
# the notification latency of the healthy sink). Every SAMPLE_EVERY seconds a row goes to
# samples.csv (events, open event workflows, `down`'s notifications by status, the hanging
# receiver's held connections, the worker's Temporal calls and task slots from /metrics); at the
# end of the load and AFTER seconds later a checkpoint records events processed, event workflows
# still open (and how long after their event was processed), attempts made to `down`, activity
# tasks by type and workflow tasks by workflow type.
#
# Then, for refuse and hang, the recovery: `down` becomes healthy (a `receiver --mode ok` on
# DOWN_PORT for refuse; the hanging receiver switched to ok on its control port, same port), and
# the script waits until no notification of `down` is parked or pending and every event is
# processed. It fails the run only when nothing moved for STALL seconds; for the base tree (whose
# retries reach the sink at their next attempt, up to 10 min apart) it stops after RECOVERY_MAX
# and reports what is left; RECOVERY_LIMIT (default none) bounds this tree's likewise. The
# receiver's tally says whether each id came once, each message's updates in version order, and
# the most answered in any RATE_WINDOW (sliding) next to RATE_DOWN.
#
# Environment (defaults in brackets):
#   TREES [this base]  SCENARIOS [healthy refuse hang]  BASE_REF [4502de1]
#   TEMPORAL [server] (or dev)  LOAD [10m]  RATE [30]  DUP_SHARE [0.1]  WARMUP [10s]
#   AFTER [120] seconds after the load for the second checkpoint; the load generator's own drain
#     timeout is DRAIN_TIMEOUT [AFTER s]
#   CONCURRENCY_DOWN [8]  RATE_DOWN [20]  ATTEMPT_TIMEOUT [mailhook's default, 30s]
#   RATE_WINDOW [1s]  SAMPLE_EVERY [15]  STALL [180]  RECOVERY_MAX [15m]  RECOVERY_LIMIT [none]
#   MAX_LOAD [2.5]  QUIET_WAIT [900]: before each run's load, wait (up to QUIET_WAIT s) for the
#     1-minute load average to drop to MAX_LOAD; the load it ran under is recorded
#   WORK [/tmp/mhsink]  RESULTS [$WORK/results]  PG [postgres://postgres@127.0.0.1:5432]
#   DB [mailhook_sinkbench]  TEMPORAL_PORT [17533]  HTTP_PORT [18580]  SINK_PORT [19500]
#   DOWN_PORT [19510]  CONTROL_PORT [19511]  TEMPORAL_CLI [$(go env GOPATH)/bin/temporal]
#
# Everything listens on 127.0.0.1 only; the script stops only the processes it started (and the
# Temporal server it started, through scripts/temporal-server.sh stop).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-/tmp/mhsink}
RESULTS=${RESULTS:-$WORK/results}
TREES=${TREES:-this base}
SCENARIOS=${SCENARIOS:-healthy refuse hang}
BASE_REF=${BASE_REF:-4502de1}
TEMPORAL=${TEMPORAL:-server}
TEMPORAL_CLI=${TEMPORAL_CLI:-$(go env GOPATH)/bin/temporal}
LOAD=${LOAD:-10m}
RATE=${RATE:-30}
DUP_SHARE=${DUP_SHARE:-0.1}
WARMUP=${WARMUP:-10s}
AFTER=${AFTER:-120}
DRAIN_TIMEOUT=${DRAIN_TIMEOUT:-${AFTER}s}
CONCURRENCY_DOWN=${CONCURRENCY_DOWN:-8}
RATE_DOWN=${RATE_DOWN:-20}
ATTEMPT_TIMEOUT=${ATTEMPT_TIMEOUT:-}
RATE_WINDOW=${RATE_WINDOW:-1s}
SAMPLE_EVERY=${SAMPLE_EVERY:-15}
STALL=${STALL:-180}
RECOVERY_MAX=${RECOVERY_MAX:-15m}
RECOVERY_LIMIT=${RECOVERY_LIMIT:-}
MAX_LOAD=${MAX_LOAD:-2.5}
QUIET_WAIT=${QUIET_WAIT:-900}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
DB=${DB:-mailhook_sinkbench}
TEMPORAL_PORT=${TEMPORAL_PORT:-17533}
HTTP_PORT=${HTTP_PORT:-18580}
SINK_PORT=${SINK_PORT:-19500}
DOWN_PORT=${DOWN_PORT:-19510}
CONTROL_PORT=${CONTROL_PORT:-19511}
TASK_QUEUE=mailhook-sinkbench
TOKEN=bench-admin-token-0123456789
PS_SECRET=whsec_bench_postscale_secret
LT=$WORK/mh-loadtest # the load generator and receiver: always this tree's
DBURL="$PG/$DB?sslmode=disable"

log() { printf '%s sink-bench: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

# shellcheck source=scripts/bench-quiet.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench-quiet.sh"

STARTED=() # pids this script started, stopped on exit
TEMPORAL_PID=
cleanup() {
	local pid
	for pid in "${STARTED[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${STARTED[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	STARTED=()
	stop_temporal
}

# stop_pid <pid> [grace seconds]: SIGTERM, then SIGKILL after the grace (default 90 s: mailhook
# gives running sink POSTs worker.stop_timeout, attempt_timeout + 5 s, to finish).
stop_pid() {
	local pid=$1 grace=${2:-90}
	forget "$pid"
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq $((grace * 5))); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "pid $pid still running ${grace}s after SIGTERM; SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# forget <pid>: an exited pid may be reused by someone else's process: the exit trap must not
# signal it.
forget() {
	local p kept=()
	for p in "${STARTED[@]}"; do
		[[ $p == "$1" ]] || kept+=("$p")
	done
	STARTED=("${kept[@]}")
}

secs() { # 10m → 600, 90s → 90, 90 → 90
	local d=$1
	case $d in
	*m) echo $((${d%m} * 60)) ;;
	*h) echo $((${d%h} * 3600)) ;;
	*s) echo "${d%s}" ;;
	*) echo "$d" ;;
	esac
}

port_free() { ! timeout 1 bash -c ": <>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

psql_db() { psql "$DBURL" -XqtA "$@"; }

# ---------------------------------------------------------------------------------------------
# setup: binaries, secrets, configs

build() {
	mkdir -p "$WORK" "$RESULTS"
	log "go build -o $WORK/mh-this ./cmd/mailhook; go build -o $LT ./cmd/mailhook-loadtest"
	(cd "$ROOT" && go build -o "$WORK/mh-this" ./cmd/mailhook && go build -o "$LT" ./cmd/mailhook-loadtest)
	if [[ " $TREES " == *" base "* ]]; then
		log "go build -o $WORK/mh-base ./cmd/mailhook at $BASE_REF"
		rm -rf "$WORK/ref-src"
		git -C "$ROOT" worktree prune
		git -C "$ROOT" worktree add --detach "$WORK/ref-src" "$BASE_REF" >/dev/null 2>&1 ||
			die "git worktree add $BASE_REF failed"
		(cd "$WORK/ref-src" && go build -o "$WORK/mh-base" ./cmd/mailhook) || {
			git -C "$ROOT" worktree remove --force "$WORK/ref-src"
			die "build of $BASE_REF failed"
		}
		git -C "$ROOT" worktree remove --force "$WORK/ref-src"
	fi
	[[ -x $TEMPORAL_CLI ]] || die "no Temporal CLI at $TEMPORAL_CLI (set TEMPORAL_CLI)"
	[[ $TEMPORAL == dev || $TEMPORAL == server ]] || die "TEMPORAL=$TEMPORAL: want dev or server"
	for p in $TEMPORAL_PORT $HTTP_PORT $SINK_PORT $DOWN_PORT $CONTROL_PORT $((CONTROL_PORT + 1)); do
		port_free "$p" || die "127.0.0.1:$p is in use; set TEMPORAL_PORT / HTTP_PORT / SINK_PORT / DOWN_PORT / CONTROL_PORT (and +1)"
	done
	[[ -f $WORK/sink.secret ]] || echo "whsec_$(head -c 32 /dev/urandom | base64)" >"$WORK/sink.secret"
	[[ -f $WORK/down.secret ]] || echo "whsec_$(head -c 32 /dev/urandom | base64)" >"$WORK/down.secret"
	for tree in $TREES; do
		write_config "$tree" >"$WORK/config-$tree.yaml"
	done
	{
		echo "nproc: $(nproc)"
		free -m | sed -n 2p
		go version
		"$TEMPORAL_CLI" --version
		echo "temporal: $TEMPORAL"
		echo "this: $(git -C "$ROOT" rev-parse --short HEAD) + $(git -C "$ROOT" status --short | wc -l) uncommitted paths"
		echo "base: $BASE_REF ($(git -C "$ROOT" rev-parse --short "$BASE_REF"))"
		psql "$PG/postgres" -tAc 'SELECT version()'
		uname -sr
		echo "TREES=$TREES SCENARIOS=$SCENARIOS LOAD=$LOAD RATE=$RATE DUP_SHARE=$DUP_SHARE AFTER=$AFTER CONCURRENCY_DOWN=$CONCURRENCY_DOWN RATE_DOWN=$RATE_DOWN ATTEMPT_TIMEOUT=${ATTEMPT_TIMEOUT:-default} RATE_WINDOW=$RATE_WINDOW RECOVERY_MAX=$RECOVERY_MAX RECOVERY_LIMIT=${RECOVERY_LIMIT:-none} STALL=$STALL"
		echo "started $(date -u +%FT%TZ)"
	} >>"$RESULTS/machine.txt"
}

# write_config <tree>: the same sinks for both trees; the new per-sink keys for this tree only.
write_config() {
	local tree=$1
	cat <<EOF
http:
  address: "127.0.0.1:$HTTP_PORT"
database:
  url: $DBURL
temporal:
  address: 127.0.0.1:$TEMPORAL_PORT
  namespace: default
  task_queue: $TASK_QUEUE
endpoints:
  - {name: postscale, provider: postscale, secrets: ["$PS_SECRET"]}
sinks:
  - name: loadtest
    url: http://127.0.0.1:$SINK_PORT/sink
    secret: "$(cat "$WORK/sink.secret")"
    types: [message.status_changed, email.received, suppression.added]
  - name: down
    url: http://127.0.0.1:$DOWN_PORT/sink
    secret: "$(cat "$WORK/down.secret")"
    types: [message.status_changed, email.received, suppression.added]
EOF
	if [[ $tree == this ]] || git -C "$ROOT" grep -q 'yaml:"rate"' "$BASE_REF" -- internal/config; then
		echo "    concurrency: $CONCURRENCY_DOWN"
		echo "    rate: $RATE_DOWN"
	fi
	if [[ -n $ATTEMPT_TIMEOUT ]]; then
		printf 'notify:\n  attempt_timeout: %s\n' "$ATTEMPT_TIMEOUT"
	fi
	cat <<EOF
admin:
  tokens:
    - {name: bench, token: $TOKEN}
EOF
}

# ---------------------------------------------------------------------------------------------
# processes

start_temporal() {
	stop_temporal
	if [[ $TEMPORAL == server ]]; then
		log "Temporal server v1.29.1 (PostgreSQL) on 127.0.0.1:$TEMPORAL_PORT, fresh databases"
		TEMPORAL_SERVER_PORT=$TEMPORAL_PORT TEMPORAL_SERVER_STATE=$WORK/temporal-server TEMPORAL_CLI=$TEMPORAL_CLI PG=$PG \
			"$ROOT/scripts/temporal-server.sh" start >/dev/null 2>>"$WORK/temporal.log" ||
			die "scripts/temporal-server.sh start failed (see $WORK/temporal.log)"
		TEMPORAL_PID=$(cat "$WORK/temporal-server/server.pid")
		return
	fi
	log "Temporal dev server (in memory) on 127.0.0.1:$TEMPORAL_PORT"
	"$TEMPORAL_CLI" server start-dev --ip 127.0.0.1 --port "$TEMPORAL_PORT" --headless --log-level warn \
		--search-attribute Provider=Keyword --search-attribute EventType=Keyword --search-attribute MessageID=Keyword \
		>>"$WORK/temporal.log" 2>&1 &
	TEMPORAL_PID=$!
	for _ in $(seq 60); do
		"$TEMPORAL_CLI" operator cluster health --address "127.0.0.1:$TEMPORAL_PORT" >/dev/null 2>&1 && break
		sleep 1
	done
	sleep 2
}

stop_temporal() {
	[[ -n $TEMPORAL_PID ]] || return 0
	if [[ $TEMPORAL == server ]]; then
		TEMPORAL_SERVER_PORT=$TEMPORAL_PORT TEMPORAL_SERVER_STATE=$WORK/temporal-server \
			"$ROOT/scripts/temporal-server.sh" stop 2>>"$WORK/temporal.log" || true
	else
		stop_pid "$TEMPORAL_PID" 30
	fi
	TEMPORAL_PID=
	for _ in $(seq 30); do
		port_free "$TEMPORAL_PORT" && break
		sleep 1
	done
}

fresh_db() {
	psql "$PG/postgres" -Xqc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB" >/dev/null 2>&1
	"$MHBIN" migrate --config "$MHCONFIG" 2>>"$RUN_DIR/migrate.log"
}

# receiver <mode> <name> <port> <control port> <secret file>: starts a `mailhook-loadtest
# receiver`, its tally to $RUN_DIR/<name>.json when stopped; sets RPID.
receiver() {
	local mode=$1 name=$2 port=$3 control=$4 secret=$5
	for _ in $(seq 30); do
		port_free "$port" && port_free "$control" && break
		sleep 1
	done
	"$LT" receiver --listen "127.0.0.1:$port" --control "127.0.0.1:$control" --secret "$(cat "$secret")" \
		--mode "$mode" --rate-window "$RATE_WINDOW" --out "$RUN_DIR/$name.json" --requests-out "$RUN_DIR/$name-requests.jsonl" \
		>"$RUN_DIR/$name.txt" 2>&1 &
	RPID=$!
	STARTED+=("$RPID")
	for _ in $(seq 50); do
		curl -fsS "http://127.0.0.1:$control/stats" >/dev/null 2>&1 && return
		sleep 0.2
	done
	die "the receiver did not start (see $RUN_DIR/$name.txt)"
}

# start_receiver <mode> <name>: the `down` sink's receiver on DOWN_PORT (control CONTROL_PORT).
start_receiver() {
	receiver "$1" "$2" "$DOWN_PORT" "$CONTROL_PORT" "$WORK/down.secret"
	RECV_PID=$RPID
}

stop_receiver() {
	[[ -n ${RECV_PID:-} ]] || return 0
	stop_pid "$RECV_PID" 20
	RECV_PID=
}

# start_late_sink: once the load generator (and its sink) has exited, a receiver in its place
# on SINK_PORT answers what mailhook still sends the healthy sink, so the recovery measures
# `down` alone; its tally is loadtest-late.json.
start_late_sink() {
	receiver ok loadtest-late "$SINK_PORT" $((CONTROL_PORT + 1)) "$WORK/sink.secret"
	LATE_PID=$RPID
}

start_mailhook() {
	"$MHBIN" serve --config "$MHCONFIG" 2>"$RUN_DIR/mailhook.log" &
	MH_PID=$!
	STARTED+=("$MH_PID")
	for _ in $(seq 150); do
		curl -fsS "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 && return
		kill -0 "$MH_PID" 2>/dev/null || die "mailhook exited (see $RUN_DIR/mailhook.log)"
		sleep 0.2
	done
	die "mailhook did not become ready (see $RUN_DIR/mailhook.log)"
}

# ---------------------------------------------------------------------------------------------
# measurements

# metrics_flat: mailhook's /metrics as key=value lines: m.req.<operation> (temporal_request),
# m.acttask.<activity_type> (RespondActivityTask* by activity type), m.wft.<workflow_type>
# (RespondWorkflowTaskCompleted), m.act.<activity_type> (activity executions),
# m.la.<activity_type> (local activities), m.slots.<worker_type> (task slots used now).
metrics_flat() {
	curl -fsS --max-time 10 "http://127.0.0.1:$HTTP_PORT/metrics" 2>/dev/null | awk '
	function lbl(s, name,   key, i, r) {
		key = name "=\""
		i = index("," s, "," key)
		if (i == 0) return ""
		r = substr(s, i + length(key))
		return substr(r, 1, index(r, "\"") - 1)
	}
	/^#/ || NF == 0 { next }
	{
		i = index($0, "{")
		if (i == 0) { name = $1; labels = ""; val = $2 }
		else {
			name = substr($0, 1, i - 1); j = index($0, "}")
			labels = substr($0, i + 1, j - i - 1); split(substr($0, j + 1), v, " "); val = v[1]
		}
		if (name == "temporal_request_total" || name == "temporal_request") {
			op = lbl(labels, "operation"); k["req." op] += val
			if (op ~ /^RespondActivityTask/) k["acttask." lbl(labels, "activity_type")] += val
			if (op == "RespondWorkflowTaskCompleted") k["wft." lbl(labels, "workflow_type")] += val
		} else if (name == "temporal_activity_execution_latency_seconds_count" || name == "temporal_activity_execution_latency_count") {
			k["act." lbl(labels, "activity_type")] += val
		} else if (name == "temporal_local_activity_total" || name == "temporal_local_activity") {
			k["la." lbl(labels, "activity_type")] += val
		} else if (name == "temporal_worker_task_slots_used") {
			k["slots." lbl(labels, "worker_type")] += val
		}
	}
	END { for (x in k) printf "m.%s=%.0f\n", x, k[x] }' || true
}

# recv_flat: the `down` receiver's tally so far (recv.<key>=<number>), if one runs.
recv_flat() {
	curl -fsS --max-time 5 "http://127.0.0.1:$CONTROL_PORT/stats" 2>/dev/null |
		jq -r 'to_entries[] | select(.value|type=="number") | "recv.\(.key)=\(.value)"' 2>/dev/null || true
}

wf_count() { # wf_count <query>
	timeout 60 "$TEMPORAL_CLI" workflow count --address "127.0.0.1:$TEMPORAL_PORT" --query "$1" 2>/dev/null | awk '/Total:/ {print $2; exit}' || true
}

# sample_row: one CSV row of samples.csv.
SAMPLE_HEADER=t,elapsed_s,loadavg1,events_accepted,events_processed,wf_open,down_pending,down_parked,down_sent,down_failed,down_attempts,down_state,recv_requests,recv_held,recv_max_held,recv_answered,act_completed,act_failed,wft_completed,starts,acttask_SendNotification,acttask_ProbeSink,acttask_DrainSink,acttask_SendProbe,acttask_SendParked,act_SendNotification,act_ProbeSink,act_DrainSink,wft_ProcessEvent,wft_SinkDelivery,slots_ActivityWorker,slots_LocalActivityWorker,slots_WorkflowWorker
sample_row() {
	local now ev nt state="" m r
	now=$(date +%s)
	ev=$(psql_db -F, -c "SELECT count(*), count(processed_at) FROM webhook_events" 2>/dev/null || echo ",")
	nt=$(psql_db -F, -c "SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'parked'),
		count(*) FILTER (WHERE status = 'sent'), count(*) FILTER (WHERE status = 'failed'), COALESCE(sum(attempts), 0)
		FROM notifications WHERE sink = 'down'" 2>/dev/null || echo ",,,,")
	[[ $TREE == this ]] && state=$(psql_db -c "SELECT state FROM sinks WHERE name = 'down'" 2>/dev/null || true)
	m=$(metrics_flat)
	r=$(recv_flat)
	get() { printf '%s\n' "$m" "$r" | awk -F= -v k="$1" '$1 == k {print $2; exit}'; }
	echo "$now,$((now - LOAD_T0)),$(load1),$ev,$(wf_count "WorkflowType='ProcessEvent' AND ExecutionStatus='Running'"),$nt,$state,$(get recv.requests),$(get recv.held_now),$(get recv.max_held),$(get recv.answered_2xx),$(get m.req.RespondActivityTaskCompleted),$(get m.req.RespondActivityTaskFailed),$(get m.req.RespondWorkflowTaskCompleted),$(get m.req.StartWorkflowExecution),$(get m.acttask.SendNotification),$(get m.acttask.ProbeSink),$(get m.acttask.DrainSink),$(get m.acttask.SendProbe),$(get m.acttask.SendParked),$(get m.act.SendNotification),$(get m.act.ProbeSink),$(get m.act.DrainSink),$(get m.wft.ProcessEvent),$(get m.wft.SinkDelivery),$(get m.slots.ActivityWorker),$(get m.slots.LocalActivityWorker),$(get m.slots.WorkflowWorker)"
}

start_sampler() { # start_sampler [append]
	[[ ${1:-} == append ]] || echo "$SAMPLE_HEADER" >"$RUN_DIR/samples.csv"
	(
		sp=
		trap '[[ -z $sp ]] || kill "$sp" 2>/dev/null; exit 0' TERM
		while :; do
			sample_row >>"$RUN_DIR/samples.csv" 2>/dev/null || true
			sleep "$SAMPLE_EVERY" &
			sp=$!
			wait "$sp" || true
			sp=
		done
	) &
	SAMPLER_PID=$!
	STARTED+=("$SAMPLER_PID")
}

stop_sampler() {
	[[ -n ${SAMPLER_PID:-} ]] || return 0
	stop_pid "$SAMPLER_PID" 70 # a sample in progress finishes first
	SAMPLER_PID=
}

# checkpoint <label>: key=value lines in checkpoint-<label>.txt.
checkpoint() {
	local label=$1 f=$RUN_DIR/checkpoint-$1.txt now
	now=$(date +%s)
	{
		echo "label=$label"
		echo "t=$now"
		echo "elapsed_s=$((now - LOAD_T0))"
		echo "loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
		psql_db -F= -c "SELECT 'events_accepted', count(*) FROM webhook_events
			UNION ALL SELECT 'events_processed', count(processed_at) FROM webhook_events" || true
		psql_db -F= -c "SELECT 'down_status_' || status, count(*) FROM notifications WHERE sink = 'down' GROUP BY status
			UNION ALL SELECT 'down_total', count(*) FROM notifications WHERE sink = 'down'
			UNION ALL SELECT 'down_attempts', COALESCE(sum(attempts), 0) FROM notifications WHERE sink = 'down'
			UNION ALL SELECT 'down_retried', count(*) FROM notifications WHERE sink = 'down' AND attempts > 1
			UNION ALL SELECT 'down_max_attempts', COALESCE(max(attempts), 0) FROM notifications WHERE sink = 'down'
			UNION ALL SELECT 'loadtest_status_' || status, count(*) FROM notifications WHERE sink = 'loadtest' GROUP BY status" || true
		if [[ $TREE == this ]]; then
			psql_db -F= -c "SELECT 'down_park_reason_' || park_reason, count(*) FROM notifications WHERE sink = 'down' AND park_reason IS NOT NULL GROUP BY park_reason
				UNION ALL SELECT 'down_state', state FROM sinks WHERE name = 'down'
				UNION ALL SELECT 'down_opened_at', extract(epoch FROM opened_at)::bigint::text FROM sinks WHERE name = 'down' AND opened_at IS NOT NULL
				UNION ALL SELECT 'down_probe_failures', probe_failures::text FROM sinks WHERE name = 'down'" || true
		fi
		open_workflows
		echo "wf_sinkdelivery_running=$(wf_count "WorkflowType='SinkDelivery' AND ExecutionStatus='Running'")"
		metrics_flat
		recv_flat
	} >"$f" 2>>"$RUN_DIR/checkpoint-errors.log"
	log "  $label: $(grep -E '^(events_accepted|events_processed|wf_open|wf_open_oldest_s|down_status_parked|down_status_pending|down_attempts)=' "$f" | tr '\n' ' ')"
}

# open_workflows: the event workflows still running, the oldest one's age, and how many of them
# belong to events processed more than 2 minutes ago.
open_workflows() {
	local list=$RUN_DIR/open-workflows.tmp
	timeout 300 "$TEMPORAL_CLI" workflow list --address "127.0.0.1:$TEMPORAL_PORT" -o jsonl --limit 200000 \
		--query "WorkflowType='ProcessEvent' AND ExecutionStatus='Running'" 2>/dev/null |
		jq -r '[.execution.workflowId, .startTime] | @tsv' 2>/dev/null >"$list" || true
	echo "wf_open=$(wc -l <"$list")"
	echo "wf_open_count=$(wf_count "WorkflowType='ProcessEvent' AND ExecutionStatus='Running'")"
	if [[ -s $list ]]; then
		echo "wf_open_oldest_s=$(sort -t$'\t' -k2 "$list" | awk 'NR == 1' | cut -f2 | xargs -I{} date -d {} +%s | awk -v n="$(date +%s)" '{print n - $1}')"
		cut -f1 "$list" | psql "$DBURL" -XqtA -F= -c "CREATE TEMP TABLE open_wf (id text)" \
			-c "\\copy open_wf FROM pstdin" \
			-c "SELECT 'wf_open_processed_2m', count(*) FROM open_wf o JOIN webhook_events e ON o.id = e.provider || ':' || e.event_id WHERE e.processed_at < now() - interval '2 minutes'" \
			-c "SELECT 'wf_open_processed', count(*) FROM open_wf o JOIN webhook_events e ON o.id = e.provider || ':' || e.event_id WHERE e.processed_at IS NOT NULL" || true
	else
		echo "wf_open_oldest_s=0"
		echo "wf_open_processed_2m=0"
		echo "wf_open_processed=0"
	fi
	rm -f "$list"
}

# ---------------------------------------------------------------------------------------------
# one run

# recover: makes `down` healthy and waits until nothing of it is parked or pending and every
# event is processed; writes recovery.txt.
recover() {
	local limit=$1 t0 left last moved now
	t0=$(date +%s)
	if [[ $SCENARIO == refuse ]]; then
		start_receiver ok receiver-recovery
	else
		curl -fsS -X POST "http://127.0.0.1:$CONTROL_PORT/mode?mode=ok" >/dev/null || die "could not switch the receiver to ok"
	fi
	log "  recovery: down answers again (limit ${limit:-none}, stall ${STALL}s)"
	last=-1 moved=$t0
	local result=done
	while :; do
		left=$(psql_db -c "SELECT (SELECT count(*) FROM notifications WHERE sink = 'down' AND status IN ('parked', 'pending'))
			+ (SELECT count(*) FROM webhook_events WHERE processed_at IS NULL)" 2>/dev/null || echo "$last")
		now=$(date +%s)
		if [[ $left == 0 ]]; then
			break
		fi
		if [[ $left != "$last" ]]; then
			last=$left moved=$now
			log "  recovery: $left parked/pending notifications + unprocessed events left after $((now - t0))s"
		fi
		if [[ -n $limit ]] && ((now - t0 >= $(secs "$limit"))); then
			result="limit"
			break
		fi
		if [[ $TREE == this ]] && ((now - moved >= STALL)); then
			result="stalled"
			break
		fi
		sleep 5
	done
	now=$(date +%s)
	{
		echo "result=$result"
		echo "t0=$t0"
		echo "recovery_s=$((now - t0))"
		echo "left=$left"
	} >"$RUN_DIR/recovery.txt"
	log "  recovery: $result after $((now - t0))s ($left left)"
	[[ $result != stalled ]] || echo "$TREE $SCENARIO: recovery stalled ($left left, no progress for ${STALL}s)" >>"$RESULTS/failures.txt"
	# Let the last answers and marks land before the tally.
	sleep 3
}

run_one() {
	TREE=$1 SCENARIO=$2
	RUN_DIR=$RESULTS/$SCENARIO-$TREE
	rm -rf "$RUN_DIR"
	mkdir -p "$RUN_DIR"
	MHBIN=$WORK/mh-$TREE MHCONFIG=$WORK/config-$TREE.yaml
	RECV_PID= SAMPLER_PID= LATE_PID=
	log "== $SCENARIO, $TREE tree"
	start_temporal
	fresh_db
	case $SCENARIO in
	healthy) start_receiver ok receiver ;;
	hang) start_receiver hang receiver ;;
	refuse) port_free "$DOWN_PORT" || die "127.0.0.1:$DOWN_PORT is in use: the refuse scenario needs it closed" ;;
	*) die "unknown scenario $SCENARIO" ;;
	esac
	start_mailhook
	wait_quiet
	local la_start
	la_start=$(cut -d' ' -f1-3 /proc/loadavg)
	echo "loadavg_start=$la_start" >"$RUN_DIR/run.txt"
	log "  load: $RATE req/s for $LOAD (load average $la_start)"
	LOAD_T0=$(date +%s)
	echo "t0=$LOAD_T0" >>"$RUN_DIR/run.txt"
	checkpoint start
	"$LT" --url "http://127.0.0.1:$HTTP_PORT" --postscale-secret "$PS_SECRET" --mix postscale=1 \
		--rate "$RATE" --dup-share "$DUP_SHARE" --duration "$LOAD" --warmup "$WARMUP" --drain-timeout "$DRAIN_TIMEOUT" \
		--sink-listen "127.0.0.1:$SINK_PORT" --sink-secret "$(cat "$WORK/sink.secret")" --sink-name loadtest \
		--database-url "$DBURL" --token "$TOKEN" --temporal-address "127.0.0.1:$TEMPORAL_PORT" \
		--mailhook-pid "$MH_PID" --cpu "mailhook=$MH_PID" --cpu "postgres=user:postgres" \
		--json "$RUN_DIR/loadtest.json" --latency-out "$RUN_DIR/latency.csv" >"$RUN_DIR/loadtest.txt" 2>&1 &
	local lt=$!
	STARTED+=("$lt")
	start_sampler
	local until=$((LOAD_T0 + $(secs "$LOAD") + 2)) # + the last requests' answers
	while (($(date +%s) < until)); do sleep 1; done
	checkpoint end
	until=$((LOAD_T0 + $(secs "$LOAD") + AFTER))
	while (($(date +%s) < until)); do sleep 1; done
	checkpoint after
	local rc=0
	wait "$lt" || rc=$?
	forget "$lt"
	echo "loadtest_rc=$rc" >>"$RUN_DIR/run.txt"
	((rc == 0)) || log "  loadtest exited $rc (its verdict: $(grep -c FAIL "$RUN_DIR/loadtest.txt" || true) failed checks; see $RUN_DIR/loadtest.txt)"
	stop_sampler
	start_late_sink
	if [[ $SCENARIO != healthy ]]; then
		start_sampler append
		if [[ $TREE == base ]]; then
			recover "$RECOVERY_MAX"
		else
			recover "$RECOVERY_LIMIT"
		fi
		stop_sampler
	fi
	checkpoint final
	stop_receiver
	stop_pid "$LATE_PID" 20
	echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RUN_DIR/run.txt"
	stop_pid "$MH_PID"
	log_summary >"$RUN_DIR/mailhook-log-summary.txt" || true
	stop_temporal
}

# log_summary: mailhook's log lines by level, and the most frequent warnings and errors (run
# ids left out of the message, so one kind of message counts once).
log_summary() {
	local f=$RUN_DIR/mailhook.log
	echo "lines by level:"
	jq -r '.level' "$f" 2>/dev/null | sort | uniq -c | sort -rn
	echo "WARN/ERROR by message (top 20):"
	jq -r 'select(.level == "WARN" or .level == "ERROR") | "\(.level) \(.msg) \(.error // "" | tostring | .[0:160])"' "$f" 2>/dev/null |
		sed -E 's/[0-9a-f]{8}-[0-9a-f-]{27}(:[0-9]+)*/<run>/g; s/(evt|ntf|msg)_[0-9a-z_]+/\1_…/g' | sort | uniq -c | sort -rn | awk 'NR <= 20'
	echo "non-JSON lines: $(grep -vc '^{' "$f" || true)"
}

# ---------------------------------------------------------------------------------------------
# summary

summary() {
	python3 - "$RESULTS" "$RATE_DOWN" "$CONCURRENCY_DOWN" "$(secs "$LOAD")" "$AFTER" <<'PY'
import csv, glob, json, os, sys
d, rate_down, conc_down, load_s, after_s = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])

def kv(path):
    out = {}
    try:
        for line in open(path):
            k, sep, v = line.rstrip("\n").partition("=")
            if sep:
                try:
                    out[k] = float(v)
                except ValueError:
                    out[k] = v
    except FileNotFoundError:
        pass
    return out

def jload(path):
    try:
        return json.load(open(path))
    except (FileNotFoundError, ValueError):
        return None

runs = {}
for rd in sorted(glob.glob(os.path.join(d, "*-*"))):
    if not os.path.isdir(rd):
        continue
    scen, _, tree = os.path.basename(rd).rpartition("-")
    r = {"scenario": scen, "tree": tree, "run": kv(os.path.join(rd, "run.txt")),
         "start": kv(os.path.join(rd, "checkpoint-start.txt")), "end": kv(os.path.join(rd, "checkpoint-end.txt")),
         "after": kv(os.path.join(rd, "checkpoint-after.txt")), "final": kv(os.path.join(rd, "checkpoint-final.txt")),
         "recovery": kv(os.path.join(rd, "recovery.txt")), "lt": jload(os.path.join(rd, "loadtest.json")),
         "recv": jload(os.path.join(rd, "receiver.json")), "recv_rec": jload(os.path.join(rd, "receiver-recovery.json")),
         "late": jload(os.path.join(rd, "loadtest-late.json")),
         "samples": [], "latency": []}
    try:
        with open(os.path.join(rd, "latency.csv")) as f:
            r["latency"] = [(int(row["sent_unix_ms"]) / 1000.0, float(row["latency_ms"])) for row in csv.DictReader(f)]
    except (FileNotFoundError, ValueError, KeyError):
        pass
    try:
        with open(os.path.join(rd, "samples.csv")) as f:
            r["samples"] = [row for row in csv.DictReader(f)]
    except FileNotFoundError:
        pass
    runs[(scen, tree)] = r

order = [(s, t) for s in ("healthy", "refuse", "hang") for t in ("this", "base") if (s, t) in runs]
order += [k for k in runs if k not in order]

def g(c, k, default=0.0):
    v = c.get(k, default)
    return v if isinstance(v, float) else default

def delta(r, a, b, k):
    return g(r[b], k) - g(r[a], k)

def act_tasks(r, a, b):
    return delta(r, a, b, "m.req.RespondActivityTaskCompleted") + delta(r, a, b, "m.req.RespondActivityTaskFailed")

def fnum(v, fmt="{:.0f}"):
    return "—" if v is None else fmt.format(v)

def sample_rate(r, col, frm, to):
    """Per-minute increase of a samples.csv counter between elapsed frm and to."""
    pts = []
    for row in r["samples"]:
        try:
            # A counter mailhook has not exported yet is 0.
            pts.append((float(row["elapsed_s"]), float(row[col] or 0)))
        except (ValueError, KeyError):
            pass
    pts = [(t, v) for t, v in pts if frm <= t <= to and v == v]
    if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
        return None
    return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0]) * 60

def sample_mean(r, col, frm, to):
    vals = []
    for row in r["samples"]:
        try:
            t, v = float(row["elapsed_s"]), float(row[col])
        except (ValueError, KeyError):
            continue
        if frm <= t <= to:
            vals.append(v)
    return sum(vals) / len(vals) if vals else None

def sample_max(r, col, to=None):
    best = None
    for row in r["samples"]:
        try:
            t, v = float(row["elapsed_s"]), float(row[col])
        except (ValueError, KeyError):
            continue
        if to is not None and t > to:
            continue
        best = v if best is None else max(best, v)
    return best

rows = []
def row(name, f, fmt="{:.0f}"):
    vals = []
    for k in order:
        try:
            v = f(runs[k])
        except (KeyError, TypeError, ZeroDivisionError, ValueError):
            v = None
        vals.append(v if isinstance(v, str) else fnum(v, fmt))
    rows.append((name, vals))

def lat_after(r, skip_s, q):
    """The q-th percentile (nearest rank) of the healthy sink's latencies, events sent skip_s or more after t0."""
    t0 = r["run"]["t0"]
    v = sorted(l for t, l in r["latency"] if t >= t0 + skip_s)
    if not v:
        return None
    import math
    return v[max(math.ceil(q / 100 * len(v)), 1) - 1]

def lat(r, q):
    return r["lt"]["notification_latency"][q] / 1e6

def recv_tally(r):
    return r["recv_rec"] if r["scenario"] == "refuse" else r["recv"]

def down_notifications(r, c="end"):
    return g(r[c], "down_total")

row("load average at the load's start (1 min)", lambda r: float(r["run"]["loadavg_start"].split()[0]), "{:.2f}")
row("load average during the load (mean of samples, 1 min)", lambda r: sample_mean(r, "loadavg1", 0, load_s), "{:.2f}")
row("events accepted by the end of the load", lambda r: g(r["end"], "events_accepted"))
row("events processed/s during the load", lambda r: (g(r["end"], "events_processed") - g(r["start"], "events_processed")) / load_s, "{:.1f}")
row("events processed by the end of the load (of accepted)", lambda r: g(r["end"], "events_processed") / g(r["end"], "events_accepted"), "{:.3f}")
row("events processed at +2 min (of accepted)", lambda r: g(r["after"], "events_processed") / g(r["after"], "events_accepted"), "{:.3f}")
row("healthy sink: notifications received", lambda r: r["lt"]["notification_latency"]["count"])
row("healthy sink: notification latency p50 (ms)", lambda r: lat(r, "p50_ns"), "{:.1f}")
row("healthy sink: notification latency p99 (ms)", lambda r: lat(r, "p99_ns"), "{:.1f}")
row("healthy sink: notification latency max (ms)", lambda r: lat(r, "max_ns"), "{:.1f}")
steady = min(60, load_s // 2)
row("healthy sink: p99 of events sent after the first %ds (ms)" % steady, lambda r: lat_after(r, steady, 99), "{:.1f}")
row("loadtest verdict (its own sink)", lambda r: "PASSED" if r["lt"]["passed"] else "FAILED: " + ", ".join(c["name"] for c in r["lt"]["verdict"] if not c["ok"]), "{}")
row("down: notifications (at +2 min)", lambda r: down_notifications(r, "after"))
row("down: attempts at +2 min (sum of notifications.attempts)", lambda r: g(r["after"], "down_attempts"))
row("down: attempts per notification", lambda r: g(r["after"], "down_attempts") / down_notifications(r, "after"), "{:.2f}")
row("down: requests the receiver got during the load (+2 min)", lambda r: g(r["after"], "recv.requests") if r["scenario"] != "refuse" else None)
row("down: parked at +2 min", lambda r: g(r["after"], "down_status_parked") if r["tree"] == "this" else None)
row("down: pending at +2 min", lambda r: g(r["after"], "down_status_pending"))
row("down: notifications retried (attempts > 1)", lambda r: g(r["after"], "down_retried"))
row("down: most attempts of one notification", lambda r: g(r["after"], "down_max_attempts"))
row("activity tasks, load + 2 min", lambda r: act_tasks(r, "start", "after"))
row("  SendNotification activity tasks", lambda r: delta(r, "start", "after", "m.acttask.SendNotification"))
# The drainer's probe and drain steps: SendProbe and SendParked (ProbeSink and DrainSink in
# trees before the drainer decided its circuit itself).
row("  probe / drain activity tasks", lambda r: "%.0f / %.0f" % (delta(r, "start", "after", "m.acttask.ProbeSink") + delta(r, "start", "after", "m.acttask.SendProbe"), delta(r, "start", "after", "m.acttask.DrainSink") + delta(r, "start", "after", "m.acttask.SendParked")), "{}")
row("activity tasks per down notification", lambda r: act_tasks(r, "start", "after") / down_notifications(r, "after"), "{:.2f}")
row("SendNotification tasks per retried notification", lambda r: delta(r, "start", "after", "m.acttask.SendNotification") / g(r["after"], "down_retried"), "{:.2f}")
row("activity tasks/min, 2nd half of the load", lambda r: (sample_rate(r, "act_completed", load_s / 2, load_s) or 0) + (sample_rate(r, "act_failed", load_s / 2, load_s) or 0), "{:.1f}")
row("  of them probes/min", lambda r: (sample_rate(r, "acttask_ProbeSink", load_s / 2, load_s) or 0) + (sample_rate(r, "acttask_SendProbe", load_s / 2, load_s) or 0), "{:.1f}")
row("workflow tasks per accepted event (+2 min)", lambda r: delta(r, "start", "after", "m.req.RespondWorkflowTaskCompleted") / g(r["after"], "events_accepted"), "{:.2f}")
row("  SinkDelivery workflow tasks", lambda r: delta(r, "start", "after", "m.wft.SinkDelivery"))
row("event workflows open at the end of the load", lambda r: g(r["end"], "wf_open"))
row("event workflows open at +2 min", lambda r: g(r["after"], "wf_open"))
row("  of them, event processed > 2 min before", lambda r: g(r["after"], "wf_open_processed_2m"))
row("  oldest open at +2 min (s)", lambda r: g(r["after"], "wf_open_oldest_s"))
row("max activity / local activity slots used (samples)", lambda r: "%s / %s" % (fnum(sample_max(r, "slots_ActivityWorker", load_s + after_s)), fnum(sample_max(r, "slots_LocalActivityWorker", load_s + after_s))), "{}")
row("hang: most connections held at once (receiver)", lambda r: r["recv"]["max_held"] if r["scenario"] == "hang" else None)
row("recovery: time (s)", lambda r: (r["recovery"]["recovery_s"] if r["recovery"]["result"] == "done" else "%s after %.0f" % (r["recovery"]["result"], r["recovery"]["recovery_s"])) if r["scenario"] != "healthy" else None, "{:.0f}")
def iso(ts):
    """Seconds since the epoch of an RFC 3339 UTC time as Go writes it (up to 9 fraction digits)."""
    from datetime import datetime, timezone
    base, _, frac = ts.rstrip("Z").partition(".")
    return datetime.fromisoformat(base).replace(tzinfo=timezone.utc).timestamp() + (float("0." + frac) if frac else 0)
row("recovery: first 2xx to down after (s)", lambda r: iso(recv_tally(r)["first_answered"]) - r["recovery"]["t0"] if r["scenario"] != "healthy" else None)
row("recovery: first to last 2xx to down (s)", lambda r: iso(recv_tally(r)["last_answered"]) - iso(recv_tally(r)["first_answered"]) if r["scenario"] != "healthy" else None)
row("recovery: left parked/pending + unprocessed", lambda r: r["recovery"]["left"] if r["scenario"] != "healthy" else None)
row("down: not sent at the end, by status", lambda r: " ".join("%s=%.0f" % (k[len("down_status_"):], v) for k, v in sorted(r["final"].items()) if k.startswith("down_status_") and k != "down_status_sent") or "0", "{}")
row("down: ids answered 2xx", lambda r: recv_tally(r)["distinct_ids_2xx"])
row("down: ids answered 2xx more than once", lambda r: recv_tally(r)["duplicate_ids"])
row("down: version-order violations", lambda r: recv_tally(r)["order_violations"])
row("down: most answered in any %s window (rate %g)" % ("1s", rate_down), lambda r: recv_tally(r)["max_answered_in_window"])
row("down: most answered in any 10 windows / 10", lambda r: recv_tally(r)["max_answered_in_10_windows"] / 10, "{:.1f}")
row("down: answered/s, first to last 2xx", lambda r: recv_tally(r)["answered_per_sec_mean"], "{:.1f}")
row("healthy sink: answered after the load generator exited", lambda r: r["late"]["answered_2xx"])
row("load average at the end (1 min)", lambda r: float(r["run"]["loadavg_end"].split()[0]), "{:.2f}")

print("| metric | " + " | ".join("%s %s" % k for k in order) + " |")
print("|---|" + "---|" * len(order))
for name, vals in rows:
    print("| " + name + " | " + " | ".join(vals) + " |")
print()

# The issue's goals, for each tree that ran the outage and its own no-outage run.
def goal(name, ok, detail):
    print("- %s: %s → %s" % (name, detail, "met" if ok else "NOT met"))
for tree in ("this", "base"):
    h = runs.get(("healthy", tree))
    for scen in ("refuse", "hang"):
        r = runs.get((scen, tree))
        if r is None:
            continue
        print("%s, %s tree%s:" % (scen, tree, "" if tree == "this" else " (for comparison: the goals are this tree's)"))
        try:
            if h:
                pe, ph = g(r["end"], "events_processed"), g(h["end"], "events_processed")
                goal("events processed by the load's end / no-outage run", ph and pe / ph >= 0.9, "%.0f / %.0f = %.2f (goal ≥ 0.9)" % (pe, ph, pe / ph if ph else 0))
                lr, lh = lat(r, "p99_ns"), lat(h, "p99_ns")
                goal("healthy sink's p99 / no-outage run", lh and lr / lh <= 1.2, "%.1f / %.1f ms = %.2f (goal ≤ 1.2)" % (lr, lh, lr / lh if lh else 0))
                sr, sh = lat_after(r, steady, 99), lat_after(h, steady, 99)
                if sr is not None and sh:
                    print("  (events sent after the first %ds: %.1f / %.1f ms = %.2f)" % (steady, sr, sh, sr / sh))
            sn, rt = delta(r, "start", "after", "m.acttask.SendNotification"), g(r["after"], "down_retried")
            goal("activity tasks per notification before it parks", rt == 0 or sn / rt <= 3, "%.0f SendNotification tasks for %.0f retried notifications (goal ≤ 3 each)" % (sn, rt))
            per_min = (sample_rate(r, "act_completed", load_s / 2, load_s) or 0) + (sample_rate(r, "act_failed", load_s / 2, load_s) or 0)
            goal("activity tasks once open (2nd half of the load)", per_min <= 60 / 5.0, "%.1f/min (goal ≤ 1 per probe interval: ≤ 12/min at 5 s)" % per_min)
            wo = g(r["after"], "wf_open_processed_2m")
            goal("event workflows open 2 min after their event was processed", wo == 0, "%.0f (open in all: %.0f)" % (wo, g(r["after"], "wf_open")))
            if scen == "hang":
                mh = r["recv"]["max_held"]
                goal("connections held by the hanging sink", mh <= conc_down, "at most %d at once (goal ≤ concurrency %d)" % (mh, conc_down))
            if r["scenario"] != "healthy":
                t = recv_tally(r)
                goal("after recovery: nothing left parked, pending or unprocessed", r["recovery"].get("left") == 0, "%s left (%s)" % (fnum(r["recovery"].get("left")), r["recovery"].get("result")))
                goal("after recovery: each id delivered once", t["duplicate_ids"] == 0, "%d ids more than once" % t["duplicate_ids"])
                goal("after recovery: per message in version order", t["order_violations"] == 0, "%d violations" % t["order_violations"])
                if tree == "this":
                    # A token bucket of burst = rate (mailhook's) allows rate × W + burst in any window W.
                    goal("after recovery: at ≤ the configured rate", t["max_answered_in_10_windows"] <= rate_down * 10 + rate_down,
                         "most in any 10 windows %d (≤ %g: 10 × rate + the bucket's burst), most in any one window %d (rate %g)" % (t["max_answered_in_10_windows"], rate_down * 11, t["max_answered_in_window"], rate_down))
        except (KeyError, TypeError) as e:
            print("  (incomplete results: %s)" % e)
PY
}

main() {
	if [[ ${1:-} == summary ]]; then
		summary
		return
	fi
	command -v jq >/dev/null || die "jq is needed"
	trap cleanup EXIT
	build
	for scenario in $SCENARIOS; do
		for tree in $TREES; do
			[[ $tree == this || $tree == base ]] || die "TREES: unknown tree $tree (this, base)"
			run_one "$tree" "$scenario"
		done
	done
	summary | tee "$RESULTS/summary.md"
}

main "$@"
