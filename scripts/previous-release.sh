#!/usr/bin/env bash
# Print the path of the previous release's `mailhook` binary on stdout, building it if needed:
# the commit pinned in deploy/previous-release (there are no tags), built from this repository's
# own history (git archive, so no work tree or worktree is touched) into
# ~/.cache/mailhook/previous-release/<commit>/, never into the repository. The upgrade test
# (TestRollingUpgradeWithRunsInFlight) runs it beside this tree. Progress goes to stderr.
#
# A clone without that commit (a shallow one, as some CI checkouts are) fails with its name:
# fetch the full history (git fetch --unshallow).
#
# Environment: PREVIOUS_RELEASE_CACHE  where the binaries go (default ~/.cache/mailhook/previous-release)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${PREVIOUS_RELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mailhook/previous-release}

log() { printf 'previous-release: %s\n' "$*" >&2; }
die() {
	printf 'previous-release: ERROR: %s\n' "$*" >&2
	exit 1
}

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
	PATH="$PATH:/usr/local/go/bin"
fi

COMMIT=$(tr -d '[:space:]' <"$ROOT/deploy/previous-release")
[[ $COMMIT =~ ^[0-9a-f]{40}$ ]] || die "deploy/previous-release holds '$COMMIT', want one full commit hash"
BIN=$CACHE/$COMMIT/mailhook
if [[ -x $BIN ]]; then
	echo "$BIN"
	exit 0
fi
if ! git -C "$ROOT" cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
	die "the previous release $COMMIT (deploy/previous-release) is not in this clone's history (shallow: $(git -C "$ROOT" rev-parse --is-shallow-repository 2>/dev/null || echo unknown)); the upgrade test builds it from there: fetch the full history (git fetch --unshallow)"
fi
command -v go >/dev/null 2>&1 || die "go not found (needed to build the previous release)"
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
start=$SECONDS
log "building mailhook at ${COMMIT:0:7} into $CACHE/$COMMIT (a minute or more on 2 cores; once)"
git -C "$ROOT" archive --format=tar "$COMMIT" | tar -x -C "$SRC"
mkdir -p "$CACHE/$COMMIT"
# Built beside its final name and renamed: an interrupted build never leaves half a binary.
(cd "$SRC" && go build -o "$BIN.$$.tmp" ./cmd/mailhook) || {
	rm -f "$BIN.$$.tmp"
	die "go build of $COMMIT failed"
}
mv "$BIN.$$.tmp" "$BIN"
log "built in $((SECONDS - start))s"
echo "$BIN"
