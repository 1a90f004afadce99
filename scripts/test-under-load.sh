#!/usr/bin/env bash
# Runs `make test` N times in a row (default 5) in a fresh clone of this repository's HEAD, with a
# shell busy loop taking one core the whole time, and prints one line per run: the result, the
# wall time and the load average at its end (docs/BENCHMARKS.md, "The test suite"; record a run as
# docs/benchmarks/<date>-<name>.md). It checks that the suite's verdicts do not depend on how fast
# a shared machine is.
#
#   scripts/test-under-load.sh [N]      logs in $OUT (default /tmp/test-under-load-<rev>)
set -u
N=${1:-5}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REV=$(git -C "$ROOT" rev-parse --short HEAD)
OUT=${OUT:-/tmp/test-under-load-$REV}
mkdir -p "$OUT"
CLONE=$(mktemp -d)
trap 'kill "$BURNER" 2>/dev/null; rm -rf "$CLONE"' EXIT
git clone -q "$ROOT" "$CLONE"
cd "$CLONE"
(while :; do :; done) &
BURNER=$!
for i in $(seq 1 "$N"); do
	start=$(date +%s)
	if CI=true make test >"$OUT/run-$i.log" 2>&1; then result=PASS; else result=FAIL; fi
	echo "run $i of $N, $REV: $result in $(($(date +%s) - start)) s (load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)); log $OUT/run-$i.log"
done
