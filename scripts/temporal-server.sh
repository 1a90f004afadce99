#!/usr/bin/env bash
# A real Temporal server (v1.29.1, PostgreSQL persistence and visibility) on this machine, for
# benchmarks and the e2e test that runs against it: the CLI's dev server (SQLite) hides what a
# regular activity costs, and users run this.
#
#   scripts/temporal-server.sh build    build (once; cached) and print the server binary's path
#   scripts/temporal-server.sh start    fresh databases, start, namespace and search attributes
#   scripts/temporal-server.sh stop     stop the server started by `start`
#   scripts/temporal-server.sh restart  start it again on the same databases (an outage's end)
#   scripts/temporal-server.sh remove   stop it and drop its two databases (tests: the shared
#                                       PostgreSQL would otherwise keep one pair per run)
#
# Environment:
#   TEMPORAL_SERVER_PORT  frontend gRPC port (default 17233); history, matching and worker take
#                         the next three, membership ports +100..+103 (they must stay below
#                         32768: the server stores them in a smallint column)
#   TEMPORAL_SERVER_STATE where the config, log and pid file go (default .dev/temporal-server)
#   TEMPORAL_SERVER_CACHE where the binaries are built (default ~/.cache/mailhook/...); never in
#                         the repository
#   PG                    PostgreSQL base URL (default postgres://postgres@127.0.0.1:5432); the
#                         databases are temporal_<port> and temporal_visibility_<port>
#   TEMPORAL_SERVER_SHARDS history shards (default 4)
#   TEMPORAL_SERVER_MAX_CONNS PostgreSQL connections each service (frontend, history, matching,
#                         worker) may open to the main database (default 20). The e2e tests set
#                         it low: their PostgreSQL is shared (docs/TESTING.md)
#   TEMPORAL_SERVER_VISIBILITY_MAX_CONNS the same to the visibility database (default the
#                         smaller of TEMPORAL_SERVER_MAX_CONNS and 4)
#   TEMPORAL_CLI          the Temporal CLI (default: scripts/ensure-temporal-cli.sh)
#   TEMPORAL_SERVER_METRICS_PORT serve the server's Prometheus metrics on 127.0.0.1:<port>/metrics
#                         (unset: none); scripts/sizing.sh reads its billable `action` counter
#   TEMPORAL_SERVER_PLUGIN the SQL plugin of both stores (default postgres12_pgx, pgx: statements
#                         prepared per connection and run on their cached plans; postgres12, lib/pq:
#                         every statement parsed and planned anew: more than twice the CPU of
#                         Temporal's database per event, docs/operations/sizing.md#cpu)
#
# `start` prints the frontend address on stdout; progress goes to stderr.
set -euo pipefail

VERSION=v1.29.1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PORT=${TEMPORAL_SERVER_PORT:-17233}
STATE=${TEMPORAL_SERVER_STATE:-$ROOT/.dev/temporal-server}
CACHE=${TEMPORAL_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mailhook/temporal-server-$VERSION}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
SHARDS=${TEMPORAL_SERVER_SHARDS:-4}
MAX_CONNS=${TEMPORAL_SERVER_MAX_CONNS:-20}
VIS_MAX_CONNS=${TEMPORAL_SERVER_VISIBILITY_MAX_CONNS:-$((MAX_CONNS < 4 ? MAX_CONNS : 4))}
METRICS_PORT=${TEMPORAL_SERVER_METRICS_PORT:-}
PLUGIN=${TEMPORAL_SERVER_PLUGIN:-postgres12_pgx}
STALL=90
DB=temporal_$PORT
VISDB=temporal_visibility_$PORT

log() { printf '%s temporal-server: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}
[[ $MAX_CONNS =~ ^[1-9][0-9]*$ ]] || die "TEMPORAL_SERVER_MAX_CONNS=$MAX_CONNS is not a positive number"
[[ $VIS_MAX_CONNS =~ ^[1-9][0-9]*$ ]] || die "TEMPORAL_SERVER_VISIBILITY_MAX_CONNS=$VIS_MAX_CONNS is not a positive number"

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
	PATH="$PATH:/usr/local/go/bin"
fi

build() {
	if [[ -x $CACHE/server && -x $CACHE/sql ]]; then
		return
	fi
	command -v go >/dev/null 2>&1 || die "go not found (needed to build the Temporal server)"
	mkdir -p "$CACHE"
	# One build at a time (a test run and a bench started together would both spend 5-10
	# minutes of the 2 cores on the same binaries): the second waits, then finds them built.
	exec 8>"$CACHE/.build.lock"
	if ! flock -n 8; then
		log "another build holds $CACHE/.build.lock; waiting for it"
		flock 8
		if [[ -x $CACHE/server && -x $CACHE/sql ]]; then
			exec 8>&-
			return
		fi
	fi
	local start=$SECONDS
	log "building go.temporal.io/server/cmd/server@$VERSION and cmd/tools/sql into $CACHE (about 5-10 minutes on 2 cores; printed when done)"
	GOBIN=$CACHE go install "go.temporal.io/server/cmd/server@$VERSION"
	log "server built in $((SECONDS - start))s; building the schema tool"
	GOBIN=$CACHE go install "go.temporal.io/server/cmd/tools/sql@$VERSION"
	log "built in $((SECONDS - start))s"
	exec 8>&-
}

# pg_parts sets HOST, PGPORT_, USER_ from $PG (postgres://user[:pw]@host:port).
pg_parts() {
	local rest=${PG#*://}
	USER_=${rest%%@*}
	USER_=${USER_%%:*}
	local hostport=${rest#*@}
	hostport=${hostport%%/*}
	HOST=${hostport%%:*}
	PGPORT_=${hostport##*:}
	if [[ $PGPORT_ == "$hostport" ]]; then
		PGPORT_=5432
	fi
}

schema() {
	pg_parts
	local sqltool=(sql --ep "$HOST" -p "$PGPORT_" -u "$USER_" --pl postgres12)
	for db in "$DB" "$VISDB"; do
		psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
	done
	PATH="$CACHE:$PATH"
	local out=$STATE/schema.log
	: >"$out"
	{
		"${sqltool[@]}" --db "$DB" create &&
			"${sqltool[@]}" --db "$DB" setup-schema -v 0.0 &&
			"${sqltool[@]}" --db "$DB" update-schema -s postgresql/v12/temporal &&
			"${sqltool[@]}" --db "$VISDB" create &&
			"${sqltool[@]}" --db "$VISDB" setup-schema -v 0.0 &&
			"${sqltool[@]}" --db "$VISDB" update-schema -s postgresql/v12/visibility
	} >>"$out" 2>&1 || {
		tail -20 "$out" >&2
		die "schema setup failed; see $out"
	}
}

write_config() {
	pg_parts
	mkdir -p "$STATE/config"
	: >"$STATE/dynamicconfig.yaml"
	local store
	store() { # store <name> <database> <max conns>
		cat <<EOF
    $1:
      sql:
        pluginName: $PLUGIN
        databaseName: $2
        connectAddr: "$HOST:$PGPORT_"
        connectProtocol: tcp
        user: $USER_
        maxConns: $3
        maxIdleConns: $3
        maxConnLifetime: 1h
EOF
	}
	{
		cat <<EOF
log:
  stdout: true
  level: warn
persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: $SHARDS
  datastores:
EOF
		store default "$DB" "$MAX_CONNS"
		store visibility "$VISDB" "$VIS_MAX_CONNS"
		cat <<EOF
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
EOF
		[[ -z $METRICS_PORT ]] || cat <<EOF
  metrics:
    prometheus:
      framework: tally
      timerType: histogram
      listenAddress: "127.0.0.1:$METRICS_PORT"
EOF
		echo "services:"
		local i=0
		for svc in frontend history matching worker; do
			cat <<EOF
  $svc:
    rpc:
      grpcPort: $((PORT + i))
      membershipPort: $((PORT + 100 + i))
      bindOnLocalHost: true
EOF
			i=$((i + 1))
		done
		cat <<EOF
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: 127.0.0.1:$PORT
dcRedirectionPolicy:
  policy: noop
dynamicConfigClient:
  filepath: $STATE/dynamicconfig.yaml
  pollInterval: 10s
EOF
	} >"$STATE/config/development.yaml"
}

stop() {
	if [[ -f $STATE/server.pid ]]; then
		local pid
		pid=$(cat "$STATE/server.pid")
		if kill -0 "$pid" 2>/dev/null; then
			log "stopping pid $pid"
			kill -TERM "$pid" 2>/dev/null || true
			for _ in $(seq 60); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.5
			done
			kill -KILL "$pid" 2>/dev/null || true
		fi
		rm -f "$STATE/server.pid"
	fi
}

# remove stops the server and drops its databases.
remove() {
	stop
	for db in "$DB" "$VISDB"; do
		psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
	done
}

# launch starts the server process on the config in $STATE and waits until it answers: as long as
# it moves (its CPU time or its log grows), however long a loaded machine takes, and fails once
# it has done neither for $STALL s (the tests' testenv.Stall), or exits.
launch() {
	local cli=$1 pid seen last changed=$SECONDS
	log "starting on 127.0.0.1:$PORT ($SHARDS shards; log $STATE/server.log)"
	"$CACHE/server" --root "$STATE" --config config --env development --allow-no-auth start >>"$STATE/server.log" 2>&1 &
	pid=$!
	echo "$pid" >"$STATE/server.pid"
	while ! "$cli" operator cluster health --address "127.0.0.1:$PORT" >/dev/null 2>&1; do
		kill -0 "$pid" 2>/dev/null || die "the server exited; see $STATE/server.log"
		# utime and stime (fields 14 and 15 of /proc/PID/stat; the name before them has no
		# spaces here) and the log's size.
		seen="$(cut -d' ' -f14,15 "/proc/$pid/stat" 2>/dev/null) $(stat -c %s "$STATE/server.log")"
		if [[ $seen != "${last:-}" ]]; then
			last=$seen changed=$SECONDS
		elif ((SECONDS - changed >= STALL)); then
			die "the server is not healthy and has made no progress (CPU time, log) for $STALL s; see $STATE/server.log"
		fi
		sleep 1
	done
}

cli() {
	local cli=${TEMPORAL_CLI:-}
	[[ -n $cli ]] || cli=$("$ROOT/scripts/ensure-temporal-cli.sh")
	echo "$cli"
}

start() {
	((PORT + 103 < 32768)) || die "TEMPORAL_SERVER_PORT $PORT: membership ports would reach $((PORT + 103)), not below 32768"
	build
	local cli
	cli=$(cli)
	stop
	mkdir -p "$STATE"
	: >"$STATE/server.log"
	log "fresh databases $DB and $VISDB"
	schema
	write_config
	launch "$cli"
	"$cli" operator namespace create --address "127.0.0.1:$PORT" --namespace default --retention 72h >&2 ||
		die "could not register the namespace"
	# The namespace reaches the frontend's cache a few seconds later.
	for _ in $(seq 30); do
		"$cli" operator namespace describe --address "127.0.0.1:$PORT" --namespace default >/dev/null 2>&1 && break
		sleep 1
	done
	sleep 10
	# One attribute per call: several in one request have been seen to register only the first.
	for sa in Provider EventType MessageID; do
		for _ in $(seq 10); do
			"$cli" operator search-attribute create --address "127.0.0.1:$PORT" --namespace default --name "$sa" --type Keyword >&2 && break
			sleep 2
		done
	done
	log "ready"
	echo "127.0.0.1:$PORT"
}

restart() {
	[[ -f $STATE/config/development.yaml ]] || die "nothing to restart in $STATE: run start first"
	stop
	launch "$(cli)"
	log "ready"
	echo "127.0.0.1:$PORT"
}

case ${1:-start} in
build)
	build
	echo "$CACHE/server"
	;;
start) start ;;
stop) stop ;;
restart) restart ;;
remove) remove ;;
*) die "usage: $0 build|start|stop|restart|remove" ;;
esac
