# Sourced by the benchmark scripts: wait for a quiet machine before measuring. The caller
# defines log() and sets MAX_LOAD and QUIET_WAIT.

load1() { cut -d' ' -f1 /proc/loadavg; }

# wait_quiet waits until the 1-minute load average is at most MAX_LOAD (bounded by QUIET_WAIT).
wait_quiet() {
	local waited=0
	while awk -v l="$(load1)" -v m="$MAX_LOAD" 'BEGIN { exit !(l > m) }'; do
		if ((waited >= QUIET_WAIT)); then
			log "load average still $(load1) after ${QUIET_WAIT}s; measuring anyway (recorded)"
			return
		fi
		((waited == 0)) && log "load average $(load1) > $MAX_LOAD; waiting (other work on the machine)"
		sleep 15
		waited=$((waited + 15))
	done
}
