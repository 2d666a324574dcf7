#!/usr/bin/env bash
# Make sure a RabbitMQ broker answers on 127.0.0.1:5672 with the plugins rbench uses.
# On a fresh Debian machine: installs rabbitmq-server (and Java for Spark) from apt.
set -euo pipefail
PLUGINS="rabbitmq_management rabbitmq_prometheus rabbitmq_stream rabbitmq_amqp1_0"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
# shellcheck source=../rbench/faults/broker-fds.sh
. "$(dirname "${BASH_SOURCE[0]}")/../rbench/faults/broker-fds.sh"

apt_install() {
  [ -n "${APT_UPDATED:-}" ] || { $SUDO apt-get update -qq; APT_UPDATED=1; }
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

if ! command -v java >/dev/null 2>&1; then
  echo "broker: installing Java 17 for Spark"; apt_install openjdk-17-jre-headless
fi
if ! command -v rabbitmq-server >/dev/null 2>&1; then
  echo "broker: installing rabbitmq-server"; apt_install rabbitmq-server
fi

port_open() { (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; }

broker_nofile /                 # the node's file descriptors (one per connection), before it boots

if ! port_open 5672; then
  echo "broker: starting rabbitmq-server"
  $SUDO rabbitmq-plugins enable --offline $PLUGINS >/dev/null
  $SUDO rabbitmq-server -detached
  for _ in $(seq 1 60); do port_open 5672 && break; sleep 1; done
fi
port_open 5672 || { echo "broker: RabbitMQ did not come up on 127.0.0.1:5672" >&2; exit 1; }
$SUDO rabbitmqctl -q await_startup >/dev/null 2>&1 || true
$SUDO rabbitmq-plugins -q enable $PLUGINS >/dev/null
for _ in $(seq 1 30); do port_open 5552 && break; sleep 1; done
port_open 5552 || { echo "broker: stream port 5552 did not open" >&2; exit 1; }
pid=$($SUDO rabbitmqctl -q eval 'os:getpid().' 2>/dev/null | tr -dc 0-9 || true)
have=$( [ -n "$pid" ] && broker_nofile_of "$pid" || true)
if [ -n "$have" ] && [ "$have" != unlimited ] && [ "$have" -lt "$(broker_nofile_wanted)" ]; then
  echo "broker: note: the running node booted with $have file descriptors (connections it can hold: fewer);" \
       "restart it to get $(broker_nofile_wanted): $SUDO rabbitmqctl stop && bash $0"
fi
echo "broker: RabbitMQ up on 127.0.0.1:5672 (streams 5552, management 15672, prometheus 15692)"
