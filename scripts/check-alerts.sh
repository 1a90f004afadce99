#!/usr/bin/env bash
# Check the Prometheus alert rules and their unit tests with promtool. Installs Debian's
# prometheus package (which ships promtool) when promtool is missing; fails with a message when
# it cannot be had. The package's own server is not started or needed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT/deploy/prometheus"

log() { printf 'check-alerts: %s\n' "$*"; }
die() {
	printf 'check-alerts: ERROR: %s\n' "$*" >&2
	exit 1
}

if ! command -v promtool >/dev/null 2>&1; then
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		log "promtool not found; installing Debian's prometheus package (for promtool only: it checks deploy/prometheus's alert rules and their unit tests)"
		export DEBIAN_FRONTEND=noninteractive
		if ! apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends prometheus >/dev/null 2>&1; then
			apt-get -o DPkg::Lock::Timeout=600 update >/dev/null || die "apt-get -o DPkg::Lock::Timeout=600 update failed; cannot install prometheus"
			apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends prometheus >/dev/null || die "apt-get -o DPkg::Lock::Timeout=600 install prometheus failed"
		fi
	fi
	command -v promtool >/dev/null 2>&1 || die "promtool is not installed and cannot be installed here; install Debian's prometheus package"
fi

promtool check rules alerts.yml
promtool test rules alerts_test.yml
log "alert rules and their tests pass"
