#!/usr/bin/env bash
# Make sure NATS (with JetStream) answers on 127.0.0.1:4222 and RabbitMQ on 127.0.0.1:5672
# (guest/guest), for the broker sinks' tests:
#
#   1. A server that already answers is used as it is.
#   2. Otherwise, if it is installed, it is started (as Debian's packages lay it out).
#   3. Otherwise apt-get -o DPkg::Lock::Timeout=600 installs nats-server / rabbitmq-server, and it is started.
#
#   scripts/ensure-brokers.sh            both (what the tests need)
#   scripts/ensure-brokers.sh nats       NATS only (what make run needs)
#
# Idempotent. Exits non-zero naming the broker that cannot be had: the tests fail, never skip,
# without it. Kafka is not needed: its sink is tested against franz-go's in-process kfake.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROOT_HINT="start NATS with JetStream on 127.0.0.1:4222 and RabbitMQ on 127.0.0.1:5672 yourself"

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
	local port=$1 what=$2 i
	for ((i = 0; i < 120; i++)); do
		answers "$port" && return 0
		sleep 0.5
	done
	die "$what did not answer on 127.0.0.1:$port within 60 s"
}

install_pkg() {
	command -v "$1" >/dev/null 2>&1 && return 0
	log "installing $2"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "$2" >/dev/null ||
		{ as_root apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null && as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "$2" >/dev/null; } ||
		die "could not install $2"
}

want=${1:-all}

if answers 4222; then
	log "NATS answers on 127.0.0.1:4222"
else
	install_pkg nats-server nats-server
	as_root mkdir -p /var/lib/nats-server
	log "starting nats-server with JetStream"
	as_root start-stop-daemon --start --oknodo --background --exec "$(command -v nats-server)" -- \
		-a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
	wait_port 4222 nats-server
fi

[[ $want == nats ]] && exit 0

if answers 5672; then
	log "RabbitMQ answers on 127.0.0.1:5672"
else
	install_pkg rabbitmq-server rabbitmq-server
	log "starting rabbitmq-server"
	as_root rabbitmq-server -detached
	wait_port 5672 rabbitmq-server
fi
command -v rabbitmqctl >/dev/null 2>&1 || die "rabbitmqctl not found: the RabbitMQ tests make a vhost each with it"
