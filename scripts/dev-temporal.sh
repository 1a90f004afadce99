#!/usr/bin/env bash
# Local Temporal development server for mailhook.
#
#   scripts/dev-temporal.sh [start]   start it in the background unless
#                                     127.0.0.1:7233 is already listening, wait
#                                     until it is healthy, and make sure the
#                                     `default` namespace has mailhook's
#                                     search attributes
#   scripts/dev-temporal.sh stop      stop the server this script started
#   scripts/dev-temporal.sh status    show whether it is running
#
# State lives in <repo>/.dev/ (gitignored): temporal.db (SQLite, so workflows
# survive restarts), temporal.log and temporal.pid. The Web UI is at
# http://127.0.0.1:8233. The CLI comes from scripts/ensure-temporal-cli.sh
# (or $TEMPORAL_CLI).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEV_DIR=$ROOT/.dev
PID_FILE=$DEV_DIR/temporal.pid
LOG_FILE=$DEV_DIR/temporal.log
DB_FILE=$DEV_DIR/temporal.db

IP=127.0.0.1
PORT=7233
UI_PORT=8233
ADDRESS=$IP:$PORT
NAMESPACE=default
SEARCH_ATTRIBUTES=(Provider EventType MessageID) # all Keyword
WAIT_SECONDS=60

log() { printf 'dev-temporal: %s\n' "$*"; }
die() {
	printf 'dev-temporal: ERROR: %s\n' "$*" >&2
	exit 1
}

port_open() {
	timeout 2 bash -c ": <>/dev/tcp/${IP}/${PORT}" 2>/dev/null
}

# PID from .dev/temporal.pid if that process is alive and is our dev server.
our_pid() {
	local pid
	[[ -f $PID_FILE ]] || return 1
	pid=$(<"$PID_FILE")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	if [[ -r /proc/$pid/cmdline ]]; then
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'server start-dev' || return 1
	fi
	printf '%s\n' "$pid"
}

temporal_cli() {
	"$TEMPORAL" "$@" --address "$ADDRESS" --command-timeout 10s
}

healthy() {
	temporal_cli operator cluster health >/dev/null 2>&1
}

start_server() {
	mkdir -p "$DEV_DIR"
	local args=(
		server start-dev
		--ip "$IP" --port "$PORT" --ui-port "$UI_PORT"
		--db-filename "$DB_FILE"
		--namespace "$NAMESPACE"
		--log-level warn
	)
	local sa
	for sa in "${SEARCH_ATTRIBUTES[@]}"; do
		args+=(--search-attribute "${sa}=Keyword")
	done
	{
		echo
		echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ) starting: $TEMPORAL ${args[*]}"
	} >>"$LOG_FILE"
	# setsid: detach from the caller's process group so that Ctrl-C on
	# `make run` stops mailhook but leaves Temporal (and its state) running.
	local launcher=()
	command -v setsid >/dev/null 2>&1 && launcher=(setsid)
	"${launcher[@]}" "$TEMPORAL" "${args[@]}" >>"$LOG_FILE" 2>&1 </dev/null &
	echo $! >"$PID_FILE"
	log "started Temporal dev server (pid $!), log: ${LOG_FILE#"$ROOT"/}, db: ${DB_FILE#"$ROOT"/}"
}

wait_healthy() {
	local pid=${1:-} deadline=$((SECONDS + WAIT_SECONDS))
	while ((SECONDS < deadline)); do
		if healthy; then
			return 0
		fi
		if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
			echo "---- last lines of $LOG_FILE ----" >&2
			tail -n 30 "$LOG_FILE" >&2 || true
			rm -f "$PID_FILE"
			die "Temporal dev server (pid $pid) exited during startup"
		fi
		sleep 1
	done
	if [[ -n $pid ]]; then
		echo "---- last lines of $LOG_FILE ----" >&2
		tail -n 30 "$LOG_FILE" >&2 || true
	fi
	die "Temporal at ${ADDRESS} did not become healthy within ${WAIT_SECONDS}s"
}

ensure_namespace() {
	local deadline=$((SECONDS + WAIT_SECONDS))
	if temporal_cli operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; then
		return 0
	fi
	log "namespace ${NAMESPACE} is missing; creating it (retention 7d)"
	local out
	if ! out=$(temporal_cli operator namespace create --namespace "$NAMESPACE" --retention 7d 2>&1); then
		grep -qi 'already' <<<"$out" || die "could not create namespace ${NAMESPACE}: ${out}"
	fi
	# The frontend's namespace cache takes a few seconds to see it.
	until temporal_cli operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "namespace ${NAMESPACE} did not become visible within ${WAIT_SECONDS}s"
		sleep 1
	done
}

ensure_search_attributes() {
	local existing sa out missing=()
	existing=$(temporal_cli operator search-attribute list --namespace "$NAMESPACE" 2>&1) ||
		die "could not list search attributes in namespace ${NAMESPACE}: ${existing}"
	for sa in "${SEARCH_ATTRIBUTES[@]}"; do
		grep -Eq "(^|[^[:alnum:]_])${sa}([^[:alnum:]_]|$)" <<<"$existing" || missing+=("$sa")
	done
	if ((${#missing[@]} == 0)); then
		log "search attributes present in namespace ${NAMESPACE}: ${SEARCH_ATTRIBUTES[*]}"
		return 0
	fi
	for sa in "${missing[@]}"; do
		if out=$(temporal_cli operator search-attribute create --namespace "$NAMESPACE" --name "$sa" --type Keyword 2>&1); then
			log "added search attribute ${sa} (Keyword) to namespace ${NAMESPACE}"
		elif grep -qi 'already exists' <<<"$out"; then
			log "search attribute ${sa} already exists"
		else
			die "could not add search attribute ${sa}: ${out}"
		fi
	done
}

cmd_start() {
	TEMPORAL=$("$ROOT/scripts/ensure-temporal-cli.sh") || die "no Temporal CLI available (see scripts/ensure-temporal-cli.sh)"
	local pid=""
	if port_open; then
		log "something is already listening on ${ADDRESS}; using it"
	elif pid=$(our_pid); then
		log "Temporal dev server (pid $pid) is still starting"
	else
		start_server
		pid=$(<"$PID_FILE")
	fi
	wait_healthy "$pid"
	log "Temporal is healthy at ${ADDRESS} (UI: http://${IP}:${UI_PORT})"
	ensure_namespace
	ensure_search_attributes
}

cmd_stop() {
	local pid i
	if ! pid=$(our_pid); then
		rm -f "$PID_FILE"
		if port_open; then
			log "no dev server started by this script is running, but ${ADDRESS} is in use by another process; leaving it alone"
		else
			log "not running"
		fi
		return 0
	fi
	log "stopping Temporal dev server (pid $pid)"
	kill -TERM "$pid"
	for ((i = 0; i < 30; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "still running after 15s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$PID_FILE"
	log "stopped"
}

cmd_status() {
	local pid
	if pid=$(our_pid); then
		log "running (pid $pid) at ${ADDRESS}, UI http://${IP}:${UI_PORT}, log ${LOG_FILE#"$ROOT"/}"
	elif port_open; then
		log "${ADDRESS} is in use by a Temporal server not started by this script"
	else
		log "not running"
		return 1
	fi
}

case ${1:-start} in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*)
	echo "usage: $0 [start|stop|status]" >&2
	exit 2
	;;
esac
