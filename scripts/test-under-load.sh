#!/usr/bin/env bash
# Runs `make test` N times in a row (default 5) in a fresh clone of this repository's HEAD beside
# load, and prints one line per run: the result, the wall time, the load average at its end and
# the most connections the shared PostgreSQL held meanwhile (docs/BENCHMARKS.md, "The test
# suite"; record a run as docs/benchmarks/<date>-<name>.md). It checks that the suite's verdicts
# do not depend on how fast a shared machine is, nor on what else uses its PostgreSQL.
#
#   scripts/test-under-load.sh [N]             logs in $OUT (default /tmp/test-under-load-<rev>)
#
# BESIDE says what the load is:
#   busy (default)  a shell busy loop taking one core the whole time
#   make            a second `make test`, in a loop, from a fresh clone of its own: two suites
#                   on one machine, sharing its PostgreSQL (max_connections 100: each suite's
#                   budget is half, scripts/check-pg-connections.sh), NATS and RabbitMQ
#   both            both
# Whatever two suites must not share, each has its own: a clone (the repository's .dev/ and
# anything written in place), the ports the tests choose, and the real Temporal server's with its
# databases (temporal_<port>) (MAILHOOK_TEST_PORTS: PORTS for the measured suite, BESIDE_PORTS
# for the other), and a TMPDIR (dev servers' and PostgreSQL clusters' data, the real server's
# state, browser profiles). Test databases, streams and vhosts carry random names. Each suite
# connects to PostgreSQL as application_name mailhook-suite-<name> (PGAPPNAME), which is how the
# connection counts tell them apart; pg-connections.log keeps a sample every 2 s.
#
# When the measured runs end, the beside suite is stopped (its process group, then whatever still
# runs from its TMPDIR) and the test databases it left are dropped; beside.txt says how its runs
# went.
set -u
N=${1:-5}
BESIDE=${BESIDE:-busy}
case $BESIDE in busy | make | both) ;; *)
	echo "BESIDE=$BESIDE: want busy, make or both" >&2
	exit 2
	;;
esac
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REV=$(git -C "$ROOT" rev-parse --short HEAD)
OUT=${OUT:-/tmp/test-under-load-$REV}
PORTS=${PORTS:-${MAILHOOK_TEST_PORTS:-}}
if [[ $BESIDE != busy ]]; then
	PORTS=${PORTS:-21000-21499}
	BESIDE_PORTS=${BESIDE_PORTS:-21500-21999}
fi
PSQL=(psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -XAt)
mkdir -p "$OUT"
# Readable by all: PgBouncer, PostgreSQL clusters and RabbitMQ nodes the tests start drop to
# their own users, and their directories are made under TMPDIR.
chmod 755 "$OUT"

BURNER= SAMPLER= BESIDE_PID=
cleanup() {
	[[ -n $BURNER ]] && kill "$BURNER" 2>/dev/null
	[[ -n $SAMPLER ]] && kill "$SAMPLER" 2>/dev/null
	stop_beside
	rm -rf "$OUT/clone-measured" "$OUT/clone-beside"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# suite NAME: a fresh clone and TMPDIR of its own under $OUT.
suite() {
	rm -rf "$OUT/clone-$1" "$OUT/tmp-$1"
	git clone -q "$ROOT" "$OUT/clone-$1"
	mkdir -p "$OUT/tmp-$1"
	chmod 755 "$OUT/tmp-$1"
}

# run_suite NAME PORTS LOG: one `make test` of suite NAME.
run_suite() {
	(cd "$OUT/clone-$1" && env CI=true TMPDIR="$OUT/tmp-$1" PGAPPNAME="mailhook-suite-$1" \
		${2:+MAILHOOK_TEST_PORTS="$2"} make test) >"$3" 2>&1
}

# peak FROM TO COLUMN: the most connections pg-connections.log saw between two times (column 2:
# all clients, 3: the measured suite, 4: the beside one).
peak() {
	awk -v from="$1" -v to="$2" -v c="$3" '$1 >= from && $1 <= to && $c > m { m = $c } END { print m + 0 }' "$OUT/pg-connections.log"
}

sample_connections() {
	while :; do
		"${PSQL[@]}" -F ' ' -c "SELECT extract(epoch FROM now())::bigint, count(*),
			count(*) FILTER (WHERE application_name = 'mailhook-suite-measured'),
			count(*) FILTER (WHERE application_name = 'mailhook-suite-beside')
			FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()" 2>/dev/null
		# What the beside suite's databases are, for dropping those it leaves when it is stopped.
		"${PSQL[@]}" -c "SELECT DISTINCT datname FROM pg_stat_activity
			WHERE application_name = 'mailhook-suite-beside' AND datname LIKE 'mailhook\_test\_%'" >>"$OUT/beside-databases.txt" 2>/dev/null
		sleep 2
	done >>"$OUT/pg-connections.log"
}

stop_beside() {
	[[ -n $BESIDE_PID ]] || return 0
	kill -- -"$BESIDE_PID" 2>/dev/null
	wait "$BESIDE_PID" 2>/dev/null
	BESIDE_PID=
	# PostgreSQL clusters (pg_ctl starts them in a session of their own) and anything else
	# started from the beside suite's TMPDIR outlive its process group.
	local pids
	pids=$(pgrep -f -- "$OUT/tmp-beside/" || true)
	[[ -n $pids ]] && kill $pids 2>/dev/null
	# The databases it was using when it stopped: its test databases, and the real server's pair
	# (named by a port of its range).
	local db lo hi
	for db in $(sort -u "$OUT/beside-databases.txt" 2>/dev/null); do
		"${PSQL[@]}" -qc "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1
	done
	IFS=- read -r lo hi <<<"$BESIDE_PORTS"
	for db in $("${PSQL[@]}" -c "SELECT datname FROM pg_database WHERE datname ~ '^temporal_(visibility_)?[0-9]+$'"); do
		local port=${db##*_}
		if ((port >= lo && port <= hi)); then
			"${PSQL[@]}" -qc "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1
		fi
	done
	echo "beside: stopped when the measured runs ended; its runs: $OUT/beside.txt"
}

suite measured
sample_connections &
SAMPLER=$!
if [[ $BESIDE != make ]]; then
	(while :; do :; done) &
	BURNER=$!
fi
if [[ $BESIDE != busy ]]; then
	suite beside
	: >"$OUT/beside.txt"
	# A session of its own, so that its whole process group can be stopped at the end.
	export -f run_suite peak
	export OUT REV BESIDE_PORTS
	setsid bash -c '
		i=0
		while :; do
			i=$((i + 1))
			start=$(date +%s)
			if run_suite beside "$BESIDE_PORTS" "$OUT/beside-$i.log"; then result=PASS; else result=FAIL; fi
			end=$(date +%s)
			echo "beside run $i, $REV: $result in $((end - start)) s (load average at the end: $(cut -d" " -f1-3 /proc/loadavg); PostgreSQL connections at most $(peak "$start" "$end" 2) in all, $(peak "$start" "$end" 4) its own); log $OUT/beside-$i.log" >>"$OUT/beside.txt"
		done' &
	BESIDE_PID=$!
fi
for i in $(seq 1 "$N"); do
	start=$(date +%s)
	if run_suite measured "$PORTS" "$OUT/run-$i.log"; then result=PASS; else result=FAIL; fi
	end=$(date +%s)
	echo "run $i of $N, $REV, beside $BESIDE: $result in $((end - start)) s (load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); PostgreSQL connections at most $(peak "$start" "$end" 2) in all, $(peak "$start" "$end" 3) this suite's); log $OUT/run-$i.log"
done
if [[ $BESIDE != busy ]]; then
	stop_beside
	cat "$OUT/beside.txt"
fi
