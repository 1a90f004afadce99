#!/bin/sh
# Runs inside temporalio/admin-tools (docker-compose service temporal-namespace).
# One-shot: waits for the Temporal frontend, creates the namespace (retention
# 7 days, so Workflow-ID dedupe covers providers' retry windows) and registers
# mailhook's Keyword search attributes. Idempotent.
set -eu

ADDRESS=${TEMPORAL_ADDRESS:-temporal:7233}
NAMESPACE=${TEMPORAL_NAMESPACE:-default}
RETENTION=${TEMPORAL_RETENTION:-7d}
SEARCH_ATTRIBUTES="Provider EventType MessageID"

t() {
	temporal "$@" --address "$ADDRESS" --command-timeout 10s
}

# retry <attempts> <command...>: 2 s between attempts.
retry() {
	n=$1
	shift
	i=1
	until "$@"; do
		if [ "$i" -ge "$n" ]; then
			echo "giving up after $n attempts: $*" >&2
			return 1
		fi
		i=$((i + 1))
		sleep 2
	done
}

echo "waiting for Temporal at $ADDRESS"
retry 60 t operator cluster health

if t operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; then
	echo "namespace $NAMESPACE exists"
else
	echo "creating namespace $NAMESPACE (retention $RETENTION)"
	t operator namespace create --namespace "$NAMESPACE" --retention "$RETENTION"
fi
# The frontend's namespace cache needs a moment to see a new namespace.
retry 30 t operator namespace describe --namespace "$NAMESPACE" >/dev/null

# One attribute per call: with SQL visibility, a single `create` carrying
# several --name flags was seen to register only the first of them
# (server 1.29.1), even though it reported success.
existing=$(retry 15 t operator search-attribute list --namespace "$NAMESPACE")
for sa in $SEARCH_ATTRIBUTES; do
	if printf '%s\n' "$existing" | grep -Eq "(^|[^[:alnum:]_])${sa}([^[:alnum:]_]|\$)"; then
		echo "search attribute $sa exists"
	else
		echo "adding search attribute $sa (Keyword)"
		retry 15 t operator search-attribute create --namespace "$NAMESPACE" --name "$sa" --type Keyword
	fi
done
echo "namespace $NAMESPACE ready"
