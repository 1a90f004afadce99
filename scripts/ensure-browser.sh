#!/usr/bin/env bash
# The browser the console's test (internal/e2e TestConsoleInABrowser) and its screenshot script
# drive: Debian's chromium (installed when missing) and playwright-core from npm, pinned and
# cached outside the repo in $SCREENSHOTS_CACHE. Prints the node_modules directory to put on
# NODE_PATH:
#
#   NODE_PATH="$(scripts/ensure-browser.sh)"
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/lib.sh"
CACHE=${SCREENSHOTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mailhook-screenshots}
PLAYWRIGHT_VERSION=1.64.1
ROOT_HINT="install Debian's chromium and nodejs yourself (apt-get install chromium nodejs npm)"

if [[ ! -x /usr/bin/chromium ]]; then
	log "installing Debian's chromium (the headless browser)" >&2
	as_root apt-get -o DPkg::Lock::Timeout=600 install -y chromium >/dev/null
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	log "installing Debian's nodejs and npm (to run playwright-core)" >&2
	as_root apt-get -o DPkg::Lock::Timeout=600 install -y nodejs npm >/dev/null
fi
have=$(node -p "require('$CACHE/node_modules/playwright-core/package.json').version" 2>/dev/null || true)
if [[ $have != "$PLAYWRIGHT_VERSION" ]]; then
	log "installing playwright-core@$PLAYWRIGHT_VERSION into $CACHE" >&2
	mkdir -p "$CACHE"
	npm install --prefix "$CACHE" --no-audit --no-fund "playwright-core@$PLAYWRIGHT_VERSION" >/dev/null
fi
printf '%s\n' "$CACHE/node_modules"
