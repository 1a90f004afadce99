#!/usr/bin/env bash
# The new user's walk to why an address bounced, in the console, against a running `make run`
# (docs/operations/console.md, "Why did an address bounce?"): `mailhook simulate` sends a
# lifecycle that bounces, then Chromium walks from the console's sign-in page to the bounce by
# what the pages say (internal/e2e/testdata/walk.cjs, which TestANewUserFindsWhyAnAddressBounced
# runs in make test) and prints each step with its time. Screenshots of the last two pages go to
# OUT.
#
#   make run            # in one terminal
#   scripts/console-walk.sh
#
# Environment: BASE [http://127.0.0.1:8000]  TOKEN [dev-admin-token]  ADDRESS [user@example.com]
#   OUT [/tmp/mailhook-console-walk]  MAILHOOK_CONFIG [deploy/mailhook.dev.yaml]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE=${BASE:-http://127.0.0.1:8000}
TOKEN=${TOKEN:-dev-admin-token}
ADDRESS=${ADDRESS:-user@example.com}
OUT=${OUT:-/tmp/mailhook-console-walk}
export MAILHOOK_CONFIG=${MAILHOOK_CONFIG:-$ROOT/deploy/mailhook.dev.yaml}

NODE_PATH=$("$ROOT/scripts/ensure-browser.sh")
export NODE_PATH
[[ -x $ROOT/bin/mailhook ]] || (cd "$ROOT" && go build -o bin/mailhook ./cmd/mailhook)
mkdir -p "$OUT"
"$ROOT/bin/mailhook" simulate | tail -3
node "$ROOT/internal/e2e/testdata/walk.cjs" "$BASE" "$TOKEN" "$ADDRESS" "$OUT"
echo "screenshots: $OUT/walk-1-recipient.png $OUT/walk-2-message.png"
