#!/usr/bin/env bash
# Validate docker-compose.yml without a Docker engine: `docker-compose config -q`.
# Installs Debian's docker-compose package when the command is missing (and
# we are root with apt-get); otherwise falls back to `docker compose`.
# Fails with a message when no compose implementation can be had.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

log() { printf 'check-compose: %s\n' "$*"; }
die() {
	printf 'check-compose: ERROR: %s\n' "$*" >&2
	exit 1
}

compose=()
if command -v docker-compose >/dev/null 2>&1; then
	compose=(docker-compose)
elif command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
elif [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
	log "docker-compose not found; installing Debian's docker-compose package"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get -o DPkg::Lock::Timeout=600 install -y docker-compose >/dev/null 2>&1; then
		apt-get -o DPkg::Lock::Timeout=600 update >/dev/null || die "apt-get -o DPkg::Lock::Timeout=600 update failed; cannot install docker-compose"
		apt-get -o DPkg::Lock::Timeout=600 install -y docker-compose >/dev/null || die "apt-get -o DPkg::Lock::Timeout=600 install docker-compose failed"
	fi
	command -v docker-compose >/dev/null 2>&1 || die "docker-compose still missing after install"
	compose=(docker-compose)
else
	die "docker-compose is not installed and cannot be installed here (need root and apt-get); install docker-compose or the Docker compose plugin"
fi

"${compose[@]}" -f docker-compose.yml config -q
log "docker-compose.yml is valid ($("${compose[@]}" version --short 2>/dev/null || echo "${compose[*]}"))"
