#!/usr/bin/env bash
# Print the path of a Temporal CLI v1.5.1 binary on stdout, building it if
# needed. Progress and errors go to stderr, so use it as:
#
#   TEMPORAL_CLI="$(scripts/ensure-temporal-cli.sh)"
#
# Lookup order:
#   1. $TEMPORAL_CLI, if set (must be executable; used as is).
#   2. $(go env GOPATH)/bin/temporal, if it is v1.5.1 (per `--version` or
#      the module version in `go version -m`).
#   3. Otherwise `go install github.com/temporalio/cli/cmd/temporal@v1.5.1`
#      into $(go env GOPATH)/bin (5-20 minutes on 2 cores). The binary lives
#      outside the repository and is never committed.
#
# v1.5.1 is the newest CLI that can be `go install`ed: later versions carry
# a replace directive for ./cliext, which `go install pkg@version` rejects.
set -euo pipefail

TEMPORAL_CLI_VERSION=1.5.1
TEMPORAL_CLI_MODULE=github.com/temporalio/cli/cmd/temporal

log() { printf 'ensure-temporal-cli: %s\n' "$*" >&2; }
die() {
	printf 'ensure-temporal-cli: ERROR: %s\n' "$*" >&2
	exit 1
}

if [[ -n ${TEMPORAL_CLI:-} ]]; then
	[[ -x $TEMPORAL_CLI && ! -d $TEMPORAL_CLI ]] ||
		die "TEMPORAL_CLI=${TEMPORAL_CLI} is not an executable file"
	printf '%s\n' "$TEMPORAL_CLI"
	exit 0
fi

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
	PATH="$PATH:/usr/local/go/bin"
fi
command -v go >/dev/null 2>&1 || die "go not found on PATH (needed to build the Temporal CLI)"

gopath=$(go env GOPATH)
gopath=${gopath%%:*} # first entry if GOPATH is a list
[[ -n $gopath ]] || die "go env GOPATH is empty"
bindir=$gopath/bin
bin=$bindir/temporal

# True if $1 runs and is CLI v1.5.1. A `go install`ed CLI reports
# "temporal version 0.0.0-DEV" (release builds inject the version with
# ldflags), so the module version in the build info is checked first.
has_version() {
	local out re="(^|[^0-9.])v?${TEMPORAL_CLI_VERSION//./\\.}([^0-9.]|$)"
	[[ -x $1 ]] || return 1
	out=$("$1" --version 2>/dev/null) || return 1
	[[ $out =~ $re ]] && return 0
	out=$(go version -m "$1" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/temporalio/cli" {print $3}') || return 1
	[[ $out == "v${TEMPORAL_CLI_VERSION}" ]]
}

if has_version "$bin"; then
	printf '%s\n' "$bin"
	exit 0
fi

mkdir -p "$bindir"
# Serialise concurrent builds (e.g. two `make` invocations at once).
lock=$bindir/.temporal-cli-install.lock
exec 9>"$lock"
if command -v flock >/dev/null 2>&1; then
	if ! flock -n 9; then
		log "another build of the Temporal CLI holds ${lock}; waiting for it"
		flock 9
	fi
fi

if has_version "$bin"; then
	printf '%s\n' "$bin"
	exit 0
fi

if [[ -e $bin ]]; then
	log "${bin} exists but is not v${TEMPORAL_CLI_VERSION} ($("$bin" --version 2>&1 | head -1 || true)); rebuilding"
fi
log "building Temporal CLI v${TEMPORAL_CLI_VERSION} into ${bindir}: 5 to 20 minutes on 2 cores, longer on a busy machine; progress every minute"
start=$SECONDS
# go install is silent while it compiles: say that it is still going, and for how long.
(
	while sleep 60; do
		log "still building the Temporal CLI ($(((SECONDS - start) / 60)) min so far)"
	done
) &
ticker=$!
trap 'kill $ticker 2>/dev/null || true' EXIT
if ! (cd / && GOBIN=$bindir go install "${TEMPORAL_CLI_MODULE}@v${TEMPORAL_CLI_VERSION}") >&2; then
	die "go install ${TEMPORAL_CLI_MODULE}@v${TEMPORAL_CLI_VERSION} failed (needs the Go module proxy or a warm module cache)"
fi
kill $ticker 2>/dev/null || true
has_version "$bin" ||
	die "built ${bin} but it does not report version ${TEMPORAL_CLI_VERSION}: $("$bin" --version 2>&1 | head -1 || true)"
log "built ${bin} in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
printf '%s\n' "$bin"
