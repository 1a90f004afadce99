#!/usr/bin/env bash
# Checks, before `make test` runs a test, that the shared PostgreSQL on 127.0.0.1:5432 has room
# for the suite's connections, and says what holds them when it has not. Without this, a server
# whose connections are taken by something else fails tests at random, deep in the run, with
# "FATAL: sorry, too many clients already".
#
# NEED is the suite's budget: at most half of a new machine's 97 usable connections
# (max_connections 100 less the superuser's 3), so two runs fit side by side. It is the sum of
# docs/TESTING.md's table ("PostgreSQL connections": internal/e2e's claims and one other
# package's pools), which TestConnectionBudgetAddsUp holds to this default and to the code. A
# server that allows fewer fails here; one whose connections are taken now gets a warning naming
# who holds them (a run beside this one is expected to hold some).
#
#   scripts/check-pg-connections.sh          NEED=46 by default
set -euo pipefail

PGHOST_ADDR=127.0.0.1
PGPORT_NUM=5432
NEED=${NEED:-46}

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

q() { psql -h "$PGHOST_ADDR" -p "$PGPORT_NUM" -U postgres -d postgres -XAtc "$1"; }

max=$(q "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int") ||
	die "cannot query PostgreSQL on ${PGHOST_ADDR}:${PGPORT_NUM}"
if ((max < NEED)); then
	die "PostgreSQL on ${PGHOST_ADDR}:${PGPORT_NUM} allows ${max} connections (max_connections less the superuser's reserve); the tests need up to ${NEED} at once: raise max_connections to at least $((NEED + 3)) (ALTER SYSTEM SET max_connections = 100, then restart PostgreSQL)"
fi
used=$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
free=$((max - used))
if ((free < NEED)); then
	holders=$(q "SELECT coalesce(datname, '?') || ' (' || count(*) || ')' FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY datname ORDER BY count(*) DESC LIMIT 5" | paste -sd, -)
	log "WARNING: ${free} of ${max} connections free and the tests may need up to ${NEED} at once; held now by databases: ${holders}. If tests fail with \"too many clients\", stop what holds them (a benchmark, a third test run) first."
	exit 0
fi
log "PostgreSQL on ${PGHOST_ADDR}:${PGPORT_NUM}: ${free} of ${max} connections free, the tests need up to ${NEED}"
