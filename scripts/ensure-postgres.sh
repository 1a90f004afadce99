#!/usr/bin/env bash
# Make sure a local PostgreSQL is accepting connections on 127.0.0.1:5432 with
# trust auth for user postgres, and that the mailhook database exists.
#
#   1. If pg_isready -h 127.0.0.1 succeeds, PostgreSQL is used as it is.
#   2. Otherwise, if a cluster exists (Debian layout), start it.
#   3. Otherwise, if PostgreSQL isn't installed, apt-get -o DPkg::Lock::Timeout=600 install it, start
#      the cluster and allow trust auth on 127.0.0.1 for user postgres.
#   4. Create the database `mailhook` (and the one named in DATABASE_URL, if
#      that points at this local server) when missing.
#
# Idempotent. Prints what it did. Exits non-zero with a clear message when
# PostgreSQL cannot be had.
set -euo pipefail

PGHOST_ADDR=127.0.0.1
PGPORT_NUM=5432
PGUSER_NAME=postgres

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROOT_HINT="start PostgreSQL on ${PGHOST_ADDR}:${PGPORT_NUM} yourself"

# Debian ships the client tools under /usr/lib/postgresql/<ver>/bin as well.
add_pg_bin_to_path() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		PATH="$PATH:$d"
	done
	export PATH
}

is_ready() {
	command -v pg_isready >/dev/null 2>&1 &&
		pg_isready -q -h "$PGHOST_ADDR" -p "$PGPORT_NUM" >/dev/null 2>&1
}

wait_ready() {
	local i
	for ((i = 0; i < 60; i++)); do
		is_ready && return 0
		sleep 0.5
	done
	return 1
}

# First cluster listed by pg_lsclusters, preferring one on our port: "<ver> <name>".
find_cluster() {
	command -v pg_lsclusters >/dev/null 2>&1 || return 1
	local line
	line=$(pg_lsclusters -h 2>/dev/null | awk -v p="$PGPORT_NUM" '$3 == p {print $1, $2; exit}')
	[[ -n $line ]] || line=$(pg_lsclusters -h 2>/dev/null | awk 'NR == 1 {print $1, $2}')
	[[ -n $line ]] || return 1
	printf '%s\n' "$line"
}

start_cluster() {
	local ver name
	read -r ver name < <(find_cluster) || return 1
	log "starting PostgreSQL cluster ${ver}/${name}"
	as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start ||
		log "pg_ctlcluster ${ver} ${name} start returned non-zero (it may already be running)"
}

install_postgres() {
	if command -v pg_createcluster >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
		log "PostgreSQL is installed but has no cluster"
	else
		apt_install_postgres
	fi
	add_pg_bin_to_path
	if ! find_cluster >/dev/null; then
		local ver
		ver=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -1)
		[[ -n $ver ]] || die "postgresql installed but no server version found under /usr/lib/postgresql"
		log "creating PostgreSQL cluster ${ver}/main"
		as_root pg_createcluster "$ver" main --port "$PGPORT_NUM" ||
			die "pg_createcluster ${ver} main failed"
	fi
}

apt_install_postgres() {
	command -v apt-get >/dev/null 2>&1 ||
		die "PostgreSQL is not installed and apt-get is not available; install PostgreSQL and start it on ${PGHOST_ADDR}:${PGPORT_NUM}"
	log "PostgreSQL is not installed; installing it with apt-get"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update ||
		die "apt-get -o DPkg::Lock::Timeout=600 update failed"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y postgresql ||
		die "apt-get -o DPkg::Lock::Timeout=600 install postgresql failed"
}

# Only used on a fresh install: let user postgres in over TCP on localhost
# without a password, as the rest of the tooling expects.
configure_trust_auth() {
	local ver name hba
	read -r ver name < <(find_cluster) || die "no PostgreSQL cluster found after install"
	hba=/etc/postgresql/${ver}/${name}/pg_hba.conf
	[[ -f $hba ]] || die "cannot find ${hba}"
	if grep -Eq "^[[:space:]]*host[[:space:]]+all[[:space:]]+(all|${PGUSER_NAME})[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust" "$hba"; then
		log "trust auth for ${PGUSER_NAME}@127.0.0.1 already configured in ${hba}"
		return 0
	fi
	log "configuring trust auth for ${PGUSER_NAME} on 127.0.0.1 and ::1 in ${hba} (development only)"
	local tmp
	tmp=$(mktemp)
	{
		echo "# Added by mailhook scripts/ensure-postgres.sh (local development only)"
		echo "host    all    ${PGUSER_NAME}    127.0.0.1/32    trust"
		echo "host    all    ${PGUSER_NAME}    ::1/128         trust"
		cat "$hba"
	} >"$tmp"
	as_root cp "$tmp" "$hba"
	rm -f "$tmp"
	as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" reload ||
		as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" restart ||
		die "could not reload PostgreSQL ${ver}/${name} after editing ${hba}"
}

psql_local() {
	psql -X -q -v ON_ERROR_STOP=1 -h "$PGHOST_ADDR" -p "$PGPORT_NUM" -U "$PGUSER_NAME" -d postgres "$@"
}

# Database named in DATABASE_URL, if it points at this local server.
database_from_url() {
	local url=${DATABASE_URL:-}
	[[ -n $url ]] || return 0
	[[ $url =~ ^postgres(ql)?://([^@/]*@)?(127\.0\.0\.1|localhost)(:${PGPORT_NUM})?/([A-Za-z0-9_]+)([?].*)?$ ]] || return 0
	printf '%s\n' "${BASH_REMATCH[5]}"
}

ensure_database() {
	local db=$1 exists
	exists=$(psql_local -tAc "SELECT 1 FROM pg_database WHERE datname = '${db}'") ||
		die "cannot query ${PGUSER_NAME}@${PGHOST_ADDR}:${PGPORT_NUM} (is trust auth configured for user ${PGUSER_NAME}?)"
	if [[ $exists == 1 ]]; then
		log "database ${db} already exists"
	else
		psql_local -c "CREATE DATABASE \"${db}\"" || die "could not create database ${db}"
		log "created database ${db}"
	fi
}

main() {
	add_pg_bin_to_path
	local fresh_install=0

	if is_ready; then
		log "PostgreSQL is already accepting connections on ${PGHOST_ADDR}:${PGPORT_NUM}"
	else
		if find_cluster >/dev/null; then
			start_cluster
		else
			install_postgres
			fresh_install=1
			start_cluster
		fi
		wait_ready || die "PostgreSQL did not become ready on ${PGHOST_ADDR}:${PGPORT_NUM} within 30s (see /var/log/postgresql/)"
		log "PostgreSQL is accepting connections on ${PGHOST_ADDR}:${PGPORT_NUM}"
		if [[ $fresh_install == 1 ]]; then
			configure_trust_auth
			wait_ready || die "PostgreSQL did not come back after the pg_hba.conf change"
		fi
	fi

	command -v psql >/dev/null 2>&1 || die "psql not found on PATH"
	ensure_database mailhook
	local extra
	extra=$(database_from_url)
	if [[ -n $extra && $extra != mailhook ]]; then
		ensure_database "$extra"
	fi
}

main "$@"
