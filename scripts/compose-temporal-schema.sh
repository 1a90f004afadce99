#!/bin/sh
# Runs inside temporalio/admin-tools (docker-compose service temporal-schema).
# Creates Temporal's own databases (temporal, temporal_visibility) in the
# compose PostgreSQL and applies every schema version. Safe to re-run on a
# retained volume: `setup-schema -v 0.0` does not reset a stamped database and
# `update-schema` only applies newer versions.
set -eu

: "${POSTGRES_SEEDS:?POSTGRES_SEEDS is required}"
: "${POSTGRES_USER:?POSTGRES_USER is required}"
: "${SQL_PASSWORD:?SQL_PASSWORD is required}"
DB_PORT=${DB_PORT:-5432}
SCHEMA_DIR=/etc/temporal/schema/postgresql/v12

sql_tool() {
	temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" "$@"
}

setup_database() {
	db=$1
	dir=$2
	if out=$(sql_tool --db "$db" create 2>&1); then
		echo "created database $db"
	elif printf '%s\n' "$out" | grep -qi 'already exists'; then
		echo "database $db already exists"
	else
		printf '%s\n' "$out" >&2
		echo "could not create database $db" >&2
		exit 1
	fi
	sql_tool --db "$db" setup-schema -v 0.0
	echo "updating schema of $db"
	sql_tool --db "$db" update-schema -d "$dir"
}

echo "Temporal schema setup on ${POSTGRES_SEEDS}:${DB_PORT}"
setup_database temporal "$SCHEMA_DIR/temporal/versioned"
setup_database temporal_visibility "$SCHEMA_DIR/visibility/versioned"
echo "Temporal schema setup complete"
