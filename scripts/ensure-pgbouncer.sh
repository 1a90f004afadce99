#!/usr/bin/env bash
# Make sure a pgbouncer binary is installed for the tests that start their own PgBouncer in
# front of PostgreSQL (internal/store/storetest.PgBouncer). Nothing is started or configured
# here: each test runs its own pgbouncer on a free port.
#
#   1. If $PGBOUNCER, `pgbouncer` on PATH or /usr/sbin/pgbouncer exists, it is used as it is.
#   2. Otherwise apt-get -o DPkg::Lock::Timeout=600 install pgbouncer (Debian's package starts no service in a container).
#
# Idempotent. Prints what it did. Exits non-zero with a clear message when PgBouncer cannot be
# had, so CI fails instead of skipping the test.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROOT_HINT="install pgbouncer yourself"

find_pgbouncer() {
	if [[ -n ${PGBOUNCER:-} ]]; then
		[[ -x $PGBOUNCER ]] || die "PGBOUNCER=${PGBOUNCER} is not an executable"
		printf '%s\n' "$PGBOUNCER"
	elif command -v pgbouncer >/dev/null 2>&1; then
		command -v pgbouncer
	elif [[ -x /usr/sbin/pgbouncer ]]; then
		printf '%s\n' /usr/sbin/pgbouncer
	else
		return 1
	fi
}

main() {
	local bin
	if bin=$(find_pgbouncer); then
		log "using ${bin} ($("$bin" --version 2>/dev/null | head -1))"
		return 0
	fi
	command -v apt-get >/dev/null 2>&1 ||
		die "pgbouncer is not installed and apt-get is not available; install PgBouncer (or set PGBOUNCER to its binary)"
	log "pgbouncer is not installed; installing it with apt-get"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y pgbouncer ||
		{ as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update && as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y pgbouncer; } ||
		die "apt-get -o DPkg::Lock::Timeout=600 install pgbouncer failed"
	bin=$(find_pgbouncer) || die "pgbouncer installed but not found on PATH or at /usr/sbin/pgbouncer"
	log "installed ${bin} ($("$bin" --version 2>/dev/null | head -1))"
}

main "$@"
