#!/usr/bin/env bash
# RabbitMQ 4.0 beside the system broker: `broker4.sh start|stop|status|ctl ARGS…` (make broker-4);
# `broker4.sh start|stop|status --variant NAME` runs scripts/variant.sh (a 4.0 node with conf/variants/NAME.*).
#
# Debian 12 packages RabbitMQ 3.10; Debian 13 (trixie) packages 4.0.x on Erlang/OTP 27, which needs a newer
# libc than this machine's. So the node runs from a debootstrap root of trixie (minbase + rabbitmq-server),
# built once outside the repo and reused, on ports of its own that clash with neither the system broker
# (5672 …) nor scripts/cluster.sh (5701+, 15701+, 15791+, 5561+, 25701+):
#   AMQP 0.9.1 and 1.0 127.0.0.1:5680, streams 5580, management 15680, Prometheus 15780, distribution 25680.
# Node name rabbit4@localhost; it registers with the host's epmd beside rabbit@localhost.
# RBENCH_BROKER4_ROOT picks the root (default /var/lib/rbench/rabbitmq-4); idempotent: start on a running
# node only checks it answers.
set -euo pipefail
ROOT="${RBENCH_BROKER4_ROOT:-/var/lib/rbench/rabbitmq-4}"
NODE="rabbit4@localhost"
AMQP_PORT=5680 STREAM_PORT=5580 MGMT_PORT=15680 PROM_PORT=15780 DIST_PORT=25680
SUITE=trixie
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
# shellcheck source=../rbench/faults/broker-fds.sh
. "$(dirname "${BASH_SOURCE[0]}")/../rbench/faults/broker-fds.sh"

die() { echo "broker-4: $*" >&2; exit 1; }
port_open() { (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; }

# The Debian mirror this machine's apt already uses (deb822 or one-line sources), so no other host is named.
mirror() {
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)
  [ -n "$uri" ] || uri=$(grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
                          | awk '{print $2}' | grep -v security | grep -i debian | head -1 || true)
  [ -n "$uri" ] || die "no Debian mirror in /etc/apt/sources.list*: cannot fetch the $SUITE packages"
  echo "$uri"
}

build_root() {
  [ -f "$ROOT/.rbench-ready" ] && return 0
  if ! command -v debootstrap >/dev/null 2>&1; then
    echo "broker-4: installing debootstrap"
    $SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq debootstrap >/dev/null \
      || die "debootstrap is not installed and apt-get could not install it"
  fi
  local m; m=$(mirror)
  echo "broker-4: building a Debian $SUITE root with rabbitmq-server in $ROOT (once; about 75 s)"
  $SUDO rm -rf "$ROOT.partial"; $SUDO mkdir -p "$(dirname "$ROOT")"
  if ! $SUDO debootstrap --variant=minbase --include=rabbitmq-server "$SUITE" "$ROOT.partial" "$m" \
       >"/tmp/rbench-broker4-debootstrap.log" 2>&1; then
    die "debootstrap of $SUITE from $m failed (log: /tmp/rbench-broker4-debootstrap.log: $(tail -1 /tmp/rbench-broker4-debootstrap.log))"
  fi
  $SUDO touch "$ROOT.partial/.rbench-ready"
  $SUDO mv "$ROOT.partial" "$ROOT"
}

configure() {
  $SUDO cp /etc/hosts "$ROOT/etc/hosts"
  $SUDO tee "$ROOT/etc/rabbitmq/rabbitmq-env.conf" >/dev/null <<EOF
NODENAME=$NODE
DIST_PORT=$DIST_PORT
EOF
  # Loopback only: a test broker with guest/guest is nobody else's business.
  $SUDO tee "$ROOT/etc/rabbitmq/rabbitmq.conf" >/dev/null <<EOF
listeners.tcp.local = 127.0.0.1:$AMQP_PORT
management.tcp.ip = 127.0.0.1
management.tcp.port = $MGMT_PORT
prometheus.tcp.ip = 127.0.0.1
prometheus.tcp.port = $PROM_PORT
stream.listeners.tcp.local = 127.0.0.1:$STREAM_PORT
stream.advertised_host = 127.0.0.1
stream.advertised_port = $STREAM_PORT
EOF
  if [ -n "${RBENCH_BROKER4_CONF:-}" ]; then          # a variant's settings, appended (docs/brokers.md)
    printf '%s\n' "$RBENCH_BROKER4_CONF" | $SUDO tee -a "$ROOT/etc/rabbitmq/rabbitmq.conf" >/dev/null
  fi
  echo "[rabbitmq_management,rabbitmq_prometheus,rabbitmq_stream]." | $SUDO tee "$ROOT/etc/rabbitmq/enabled_plugins" >/dev/null
  broker_nofile "$ROOT"          # the node's file descriptors (one per connection): su in the root applies it
}

mounts() {
  mountpoint -q "$ROOT/proc" || $SUDO mount -t proc proc "$ROOT/proc"
  mountpoint -q "$ROOT/dev" || $SUDO mount --bind /dev "$ROOT/dev"
}

in_root() { $SUDO chroot "$ROOT" env HOME=/var/lib/rabbitmq "$@"; }

answers() { in_root rabbitmqctl -q -n "$NODE" status >/dev/null 2>&1; }

start() {
  build_root
  if port_open "$AMQP_PORT" && answers; then
    echo "broker-4: RabbitMQ $(version) already up on 127.0.0.1:$AMQP_PORT"; fd_note; return 0
  fi
  port_open "$AMQP_PORT" && die "port $AMQP_PORT is taken by something that is not $NODE"
  configure; mounts
  echo "broker-4: starting $NODE"
  in_root rabbitmq-server -detached >/dev/null 2>&1 || true
  for _ in $(seq 1 90); do port_open "$AMQP_PORT" && break; sleep 1; done
  in_root rabbitmqctl -q -n "$NODE" await_startup --timeout 60 >/dev/null 2>&1 \
    || die "$NODE did not start (log: $ROOT/var/log/rabbitmq/)"
  for _ in $(seq 1 30); do port_open "$STREAM_PORT" && port_open "$MGMT_PORT" && break; sleep 1; done
  port_open "$STREAM_PORT" || die "stream port $STREAM_PORT did not open"
  echo "broker-4: RabbitMQ $(version) up on 127.0.0.1:$AMQP_PORT (streams $STREAM_PORT, management $MGMT_PORT, prometheus $PROM_PORT)"
}

fd_note() {     # a node that booted before the limits.d entry keeps its old limit until restarted
  local pid have
  pid=$(in_root rabbitmqctl -q -n "$NODE" eval 'os:getpid().' 2>/dev/null | tr -dc 0-9 || true)
  have=$( [ -n "$pid" ] && broker_nofile_of "$pid" || true)
  if [ -n "$have" ] && [ "$have" != unlimited ] && [ "$have" -lt "$(broker_nofile_wanted)" ]; then
    echo "broker-4: note: $NODE booted with $have file descriptors (connections it can hold: fewer);" \
         "restart it to get $(broker_nofile_wanted): bash $0 stop && bash $0 start"
  fi
}

version() { in_root rabbitmqctl -q -n "$NODE" version 2>/dev/null || echo "?"; }

stop() {
  [ -d "$ROOT" ] || { echo "broker-4: not built"; return 0; }
  if answers; then in_root rabbitmqctl -q -n "$NODE" stop >/dev/null 2>&1 || true; fi
  for _ in $(seq 1 30); do port_open "$AMQP_PORT" || break; sleep 1; done
  echo "broker-4: stopped"
}

# `start|stop|status --variant NAME`: a variant's node of its own (scripts/variant.sh, conf/variants/NAME.*)
if [ "${2:-}" = "--variant" ]; then
  exec bash "$(dirname "${BASH_SOURCE[0]}")/variant.sh" "$1" "${3:-}" "${4:-}"
fi

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) if port_open "$AMQP_PORT" && answers; then echo "broker-4: up, RabbitMQ $(version)"; else echo "broker-4: down"; exit 3; fi ;;
  ctl) shift; in_root rabbitmqctl -n "$NODE" "$@" ;;
  *) die "usage: broker4.sh start|stop|status|ctl ARGS…" ;;
esac
