#!/usr/bin/env bash
# Retake the console's screenshots in docs/images/console-*.png from a real run:
#
#   scripts/console-screenshots.sh
#
# It runs the console's browser test (internal/e2e TestConsoleInABrowser) with
# CONSOLE_SCREENSHOTS set: the test makes its data (a simulated lifecycle, a refused request, a
# sink that is down and parks, an erased address) over PostgreSQL and the Temporal dev server,
# and its Chromium saves each page as it goes. A change to a page is retaken by running this
# again (docs/operations/console.md shows them).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/lib.sh"
OUT=$ROOT/docs/images

"$ROOT/scripts/ensure-browser.sh" >/dev/null
"$ROOT/scripts/ensure-postgres.sh"
TEMPORAL_CLI=$("$ROOT/scripts/ensure-temporal-cli.sh")
export TEMPORAL_CLI
mkdir -p "$OUT"
cd "$ROOT"
CONSOLE_SCREENSHOTS=$OUT go test -count=1 -run '^TestConsoleInABrowser$' ./internal/e2e/
log "saved: $(ls docs/images/console-*.png | tr '\n' ' ')"
