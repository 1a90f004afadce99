#!/usr/bin/env bash
# Retake the Temporal UI screenshots in docs/images/ from a real run:
#
#   scripts/screenshots.sh
#
# It uses the `make run` already serving on 127.0.0.1:8000 (with its dev Temporal and UI on
# :8233), or starts one and stops it at the end; sends `mailhook simulate`'s lifecycle; then
# opens the Temporal UI in Debian's headless Chromium (installed when missing) through
# playwright-core (npm, cached outside the repo in $SCREENSHOTS_CACHE) and saves:
#
#   docs/images/ui-message-runs.png   the runs of one message, found by MessageID
#   docs/images/ui-bounce-run.png     the bounce's run: input, result, steps, the Process step opened
#
# The pictures show what the README says the UI shows; a UI upgrade that changes them is
# retaken by running this again.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/lib.sh"
CACHE=${SCREENSHOTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mailhook-screenshots}
PLAYWRIGHT_VERSION=1.64.1
UI=http://127.0.0.1:8233
OUT=$ROOT/docs/images
ROOT_HINT="install Debian's chromium yourself"

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if [[ ! -x /usr/bin/chromium ]]; then
	log "installing Debian's chromium (headless browser for the screenshots)"
	as_root apt-get install -y chromium >/dev/null
fi
if [[ ! -d $CACHE/node_modules/playwright-core ]]; then
	log "installing playwright-core@$PLAYWRIGHT_VERSION into $CACHE"
	mkdir -p "$CACHE"
	npm install --prefix "$CACHE" --no-audit --no-fund "playwright-core@$PLAYWRIGHT_VERSION" >/dev/null
fi

cd "$ROOT"
started=
if ! listening 8000; then
	log "no mailhook on :8000: starting make run (log: .dev/screenshots-run.log)"
	mkdir -p .dev
	setsid make run >.dev/screenshots-run.log 2>&1 &
	started=$!
	trap 'kill -- -$started 2>/dev/null || true' EXIT
	for i in $(seq 1 1800); do
		listening 8000 && break
		kill -0 "$started" 2>/dev/null || die "make run stopped: see .dev/screenshots-run.log"
		((i % 60 == 0)) && log "still waiting for make run ($((i / 60)) min; the first one builds the Temporal CLI)"
		sleep 1
	done
fi
listening 8233 || die "no Temporal UI on :8233 (the dev server's UI); is this a make run?"

log "sending the simulated lifecycle"
sim=$(MAILHOOK_CONFIG=deploy/mailhook.dev.yaml go run ./cmd/mailhook simulate)
printf '%s\n' "$sim"
message=$(grep -o 'msg_sim_[A-Za-z0-9_]*' <<<"$sim" | head -1)
[[ -n $message ]] || die "simulate printed no message id"

mkdir -p "$OUT"
log "taking the screenshots of $message"
NODE_PATH=$CACHE/node_modules node "$ROOT/scripts/screenshots.cjs" "$UI" "$message" "$OUT"
log "saved: $(cd "$ROOT" && ls docs/images/*.png | tr '\n' ' ')"
