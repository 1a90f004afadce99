# Helpers shared by scripts/ensure-postgres.sh and scripts/ensure-pgbouncer.sh; source it:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Every line is prefixed with the sourcing script's name (ensure-postgres: ...). A script may
# set ROOT_HINT to what a user without root can do instead; as_root's error names it.

LIB_NAME=$(basename "$0" .sh)

log() { printf '%s: %s\n' "$LIB_NAME" "$*"; }
die() {
	printf '%s: ERROR: %s\n' "$LIB_NAME" "$*" >&2
	exit 1
}

# as_root runs a command as root: directly when we are root, else through passwordless sudo.
as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo -n "$@"
	else
		die "need root to run: $* (re-run as root${ROOT_HINT:+, or ${ROOT_HINT}})"
	fi
}
