#!/usr/bin/env bash
# mailhook's sizing and cost model (docs/operations/sizing.md): measures what one event costs on
# the real Temporal server and PostgreSQL, and prints the per-event figures and the table for
# 1 M, 10 M and 100 M events a day.
#
#   scripts/sizing.sh                    RUNS (1) load runs (scripts/loadtest-bench.sh's sizing
#                                        phase: serve --worker=false + worker, as the Helm chart
#                                        runs them), then the model of every run in $RESULTS
#   scripts/sizing.sh model [DIR…]       only print the model of earlier runs (default $RESULTS)
#   scripts/sizing.sh model --json F DIR  …and write its per-event inputs to F
#   scripts/sizing.sh compare A B        per-event figures of run directories A (the model's)
#                                        and B (a fresh run), and how far B is from A (goal ≤ 10 %)
#
# It writes nothing under docs/. Variables (and every one of scripts/loadtest-bench.sh):
#   WORK (/tmp/mhsizing), RESULTS ($WORK/results), SIZING_EVENTS (5000), SIZING_SEED (1: the
#   traffic's lifecycles, re-sends and batches; another seed for a fresh run), RUNS (1)
#   ports, all outside 10000-19999: TEMPORAL_PORT (27233; +1..+3 and +100..+103 too), HTTP_PORT
#   (28080), SINK_PORT (29100), PGO_PORT (25433: the run's own PostgreSQL cluster),
#   WORKER_METRICS_PORT (29090), TEMPORAL_METRICS_PORT (29091)
#   NAMESPACE_RETENTION_DAYS (7): the Temporal namespace's retention, for history storage
#   MAX_LOAD (4), QUIET_WAIT (120): wait up to QUIET_WAIT s for the 1-minute load to reach MAX_LOAD
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export WORK=${WORK:-/tmp/mhsizing}
export RESULTS=${RESULTS:-$WORK/results}
export TEMPORAL=server PHASES=sizing
export TEMPORAL_PORT=${TEMPORAL_PORT:-27233} HTTP_PORT=${HTTP_PORT:-28080} SINK_PORT=${SINK_PORT:-29100}
export PGO_PORT=${PGO_PORT:-25433} WORKER_METRICS_PORT=${WORKER_METRICS_PORT:-29090} TEMPORAL_METRICS_PORT=${TEMPORAL_METRICS_PORT:-29091}
export DB=${DB:-mailhook_sizing} RUNS=${RUNS:-1} MAX_LOAD=${MAX_LOAD:-4} QUIET_WAIT=${QUIET_WAIT:-120}
export SIZING_EVENTS=${SIZING_EVENTS:-5000}
export NAMESPACE_RETENTION_DAYS=${NAMESPACE_RETENTION_DAYS:-7}

model() {
	python3 "$ROOT/scripts/sizing_model.py" "$@"
}

case ${1:-run} in
run)
	"$ROOT/scripts/loadtest-bench.sh" >/dev/null
	model "$RESULTS"
	;;
model)
	shift
	[[ $# -gt 0 ]] || set -- "$RESULTS"
	model "$@"
	;;
compare)
	[[ $# -eq 3 ]] || {
		echo "usage: scripts/sizing.sh compare A B" >&2
		exit 2
	}
	model --compare "$2" "$3"
	;;
*)
	echo "usage: scripts/sizing.sh [run | model [--json FILE] [DIR…] | compare A B]" >&2
	exit 2
	;;
esac
