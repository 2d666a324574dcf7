#!/usr/bin/env bash
# A broker variant: a RabbitMQ 4.0 node of its own with a given configuration, beside rabbit4@localhost, so one
# workload can compare "4.0 default" with "4.0 tuned" or "4.0 Mnesia" with "4.0 Khepri" (docs/brokers.md).
#
#   variant.sh start NAME          start the variant's node (idempotent: a running node is only checked)
#   variant.sh stop NAME [--clean] stop it; --clean also removes its data, logs and configuration
#   variant.sh status NAME         whether it answers (exit 3 when not)
#   variant.sh info [NAME…]        the layout: name, slot, node, ports and directory, one variant a line
#   variant.sh uri NAME            its AMQP URI (guest/guest, loopback)
#   variant.sh ctl NAME ARGS…      its rabbitmqctl
#
# A variant is files in conf/variants/ (RBENCH_VARIANTS_DIR): NAME.conf (required: a rabbitmq.conf snippet
# appended to the node's own listeners, and the line `# slot: S` that picks its ports), NAME.advanced.config
# (optional: the node's advanced.config, an Erlang term list) and NAME.feature_flags (optional: flags enabled
# once the node has booted, one a line; khepri_db cannot be disabled again, which is why a variant is a node
# with a data directory of its own).
#
# The layout (the only place it is written): slot S in 0-9 gives node rabbit4-NAME@localhost on
#   AMQP 0.9.1 and 1.0 5690+S, streams 5590+S, management 15660+S, Prometheus 15760+S, distribution 25690+S,
# all on 127.0.0.1; none clashes with the system broker (5672, 5552, 15672, 15692, 25672), broker4.sh
# (5680, 5580, 15680, 15780, 25680) or either layout of cluster.sh (tests/unit/test_variants.py checks it).
# The node runs from broker4.sh's debootstrap root (RBENCH_BROKER4_ROOT; `make broker-4` builds it) with its
# files in /var/lib/rbench-variants/NAME inside that root.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VARIANTS_DIR="${RBENCH_VARIANTS_DIR:-$HERE/conf/variants}"
ROOT="${RBENCH_BROKER4_ROOT:-/var/lib/rbench/rabbitmq-4}"
INNER_BASE=/var/lib/rbench-variants
BIND=127.0.0.1
MAX_SLOT=9
BOOT_TIMEOUT=120
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
# shellcheck source=../rbench/faults/broker-fds.sh
. "$HERE/rbench/faults/broker-fds.sh"

die() { echo "variant: $*" >&2; exit 1; }
say() { echo "variant: $*"; }
port_open() { (exec 3<>"/dev/tcp/$BIND/$1") 2>/dev/null; }

# ---- the layout ---------------------------------------------------------------------------------
amqp_port() { echo $((5690 + $1)); }
stream_port() { echo $((5590 + $1)); }
mgmt_port() { echo $((15660 + $1)); }
prom_port() { echo $((15760 + $1)); }
dist_port() { echo $((25690 + $1)); }
node_name() { echo "rabbit4-$1@localhost"; }
inner_dir() { echo "$INNER_BASE/$1"; }
node_dir() { echo "$ROOT$INNER_BASE/$1"; }

check_name() {
  [[ "${1:-}" =~ ^[a-z0-9_]+$ ]] || die "expected a variant name (lower-case letters, digits, _), got '${1:-}'"
  [ -f "$VARIANTS_DIR/$1.conf" ] || die "no variant '$1': $VARIANTS_DIR/$1.conf does not exist (variants: $(names | tr '\n' ' '))"
}

names() { for f in "$VARIANTS_DIR"/*.conf; do [ -f "$f" ] && basename "$f" .conf; done; }

slot() {        # the `# slot: S` line of NAME.conf
  local s
  s=$(sed -n 's/^#[[:space:]]*slot:[[:space:]]*\([0-9][0-9]*\)[[:space:]]*$/\1/p' "$VARIANTS_DIR/$1.conf" | head -1)
  [ -n "$s" ] || die "$VARIANTS_DIR/$1.conf: expected a line '# slot: S' (S from 0 to $MAX_SLOT: the variant's ports)"
  [ "$s" -le "$MAX_SLOT" ] || die "$VARIANTS_DIR/$1.conf: slot $s: expected 0 to $MAX_SLOT"
  local other
  for other in $(names); do
    [ "$other" = "$1" ] && continue
    [ "$(sed -n 's/^#[[:space:]]*slot:[[:space:]]*\([0-9][0-9]*\)[[:space:]]*$/\1/p' "$VARIANTS_DIR/$other.conf" | head -1)" = "$s" ] \
      && die "$VARIANTS_DIR/$1.conf: slot $s is also $other's; give each variant its own"
  done
  echo "$s"
}

info() {
  local n s
  for n in "$@"; do
    check_name "$n"; s=$(slot "$n")
    echo "$n slot=$s node=$(node_name "$n") amqp=$(amqp_port "$s") stream=$(stream_port "$s") management=$(mgmt_port "$s") prometheus=$(prom_port "$s") dist=$(dist_port "$s") dir=$(node_dir "$n")"
  done
}

# ---- the node -----------------------------------------------------------------------------------
in_root() { $SUDO chroot "$ROOT" env HOME=/var/lib/rabbitmq "$@"; }
ctl() { local n=$1; shift; in_root rabbitmqctl -q -n "$(node_name "$n")" "$@"; }
answers() { ctl "$1" status >/dev/null 2>&1; }

need_root() {
  [ -f "$ROOT/.rbench-ready" ] || die "RabbitMQ 4.0's root $ROOT is not built; run 'make broker-4' (scripts/broker4.sh) first"
  mountpoint -q "$ROOT/proc" || $SUDO mount -t proc proc "$ROOT/proc" || die "cannot mount /proc in $ROOT"
  mountpoint -q "$ROOT/dev" || $SUDO mount --bind /dev "$ROOT/dev" || die "cannot mount /dev in $ROOT"
}

write_config() {
  local n=$1 s=$2 dir
  dir=$(node_dir "$n")
  $SUDO mkdir -p "$dir/mnesia" "$dir/log"
  {
    echo "# written by rbench's variant.sh: node $(node_name "$n"), slot $s"
    echo "listeners.tcp.1 = $BIND:$(amqp_port "$s")"
    echo "management.tcp.ip = $BIND"
    echo "management.tcp.port = $(mgmt_port "$s")"
    echo "prometheus.tcp.ip = $BIND"
    echo "prometheus.tcp.port = $(prom_port "$s")"
    echo "stream.listeners.tcp.1 = $BIND:$(stream_port "$s")"
    echo "stream.advertised_host = $BIND"
    echo "stream.advertised_port = $(stream_port "$s")"
    echo "# the variant's own settings: $VARIANTS_DIR/$n.conf"
    cat "$VARIANTS_DIR/$n.conf"
  } | $SUDO tee "$dir/rabbitmq.conf" >/dev/null
  if [ -f "$VARIANTS_DIR/$n.advanced.config" ]; then
    $SUDO cp "$VARIANTS_DIR/$n.advanced.config" "$dir/advanced.config"
  else
    echo "[]." | $SUDO tee "$dir/advanced.config" >/dev/null
  fi
  echo "# rbench variant.sh: the node's settings come from its environment" | $SUDO tee "$dir/rabbitmq-env.conf" >/dev/null
  echo "[rabbitmq_management,rabbitmq_prometheus,rabbitmq_stream]." | $SUDO tee "$dir/enabled_plugins" >/dev/null
  in_root chown -R rabbitmq: "$(inner_dir "$n")"
}

node_env() {    # the environment the node boots with (rabbitmq-server reads these before any file)
  local n=$1 s=$2 d
  d=$(inner_dir "$n")
  echo RABBITMQ_NODENAME="$(node_name "$n")" RABBITMQ_DIST_PORT="$(dist_port "$s")" \
       RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" RABBITMQ_ADVANCED_CONFIG_FILE="$d/advanced.config" \
       RABBITMQ_CONF_ENV_FILE="$d/rabbitmq-env.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
       RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" RABBITMQ_PID_FILE="$d/rabbit.pid" \
       ERL_EPMD_ADDRESS="$BIND"
}

enable_flags() {
  local n=$1 flag
  [ -f "$VARIANTS_DIR/$n.feature_flags" ] || return 0
  while read -r flag; do
    flag=${flag%%#*}; flag=${flag//[[:space:]]/}
    [ -n "$flag" ] || continue
    # --opt-in: a file that names a flag asks for it; khepri_db is one of 4.0's opt-in flags
    ctl "$n" enable_feature_flag --opt-in "$flag" >/dev/null || die "$(node_name "$n"): enable_feature_flag $flag failed"
    say "$(node_name "$n"): feature flag $flag enabled"
  done <"$VARIANTS_DIR/$n.feature_flags"
}

start() {
  local n=$1 s what port
  check_name "$n"; s=$(slot "$n")
  need_root
  if port_open "$(amqp_port "$s")" && answers "$n"; then
    enable_flags "$n"
    say "$(node_name "$n") already up on $BIND:$(amqp_port "$s")"; return 0
  fi
  for what in "AMQP:$(amqp_port "$s")" "streams:$(stream_port "$s")" "management:$(mgmt_port "$s")" \
              "Prometheus:$(prom_port "$s")" "Erlang distribution:$(dist_port "$s")"; do
    port=${what##*:}
    port_open "$port" && die "port $port (${what%:*} of $(node_name "$n")) is taken by another process"
  done
  broker_nofile "$ROOT"        # the node's file descriptors, one per connection (su in the root applies it)
  write_config "$n" "$s"
  say "starting $(node_name "$n") (settings: $VARIANTS_DIR/$n.*)"
  # In the foreground of a session of its own (setsid), so that a node that refuses its settings and exits is
  # seen at once instead of after the boot timeout; the node outlives this script.
  local log pid t
  log="$(node_dir "$n")/log/startup.log"
  # shellcheck disable=SC2046
  setsid $SUDO chroot "$ROOT" env HOME=/var/lib/rabbitmq $(node_env "$n" "$s") rabbitmq-server </dev/null >"$log" 2>&1 &
  pid=$!
  for t in $(seq 1 "$BOOT_TIMEOUT"); do
    # the AMQP listener opens late in the boot: only then ask (each rabbitmqctl costs a second of CPU)
    if port_open "$(amqp_port "$s")"; then
      ctl "$n" await_startup --timeout 60 >/dev/null 2>&1 && break
      die "$(node_name "$n") opened its AMQP port but did not finish booting (log: $(node_dir "$n")/log/)"
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      die "$(node_name "$n") exited while booting: $(grep -v '^[[:space:]]*$' "$log" | grep -iE 'error|invalid|unknown' | head -1 | cut -c1-200) (log: $log)"
    fi
    [ "$t" -eq "$BOOT_TIMEOUT" ] && die "$(node_name "$n") did not boot within $BOOT_TIMEOUT s (log: $(node_dir "$n")/log/)"
    sleep 1
  done
  enable_flags "$n"
  for _ in $(seq 1 30); do port_open "$(stream_port "$s")" && port_open "$(mgmt_port "$s")" && break; sleep 1; done
  port_open "$(mgmt_port "$s")" || die "management port $(mgmt_port "$s") did not open"
  say "$(node_name "$n") up on $BIND:$(amqp_port "$s") (streams $(stream_port "$s"), management $(mgmt_port "$s"), prometheus $(prom_port "$s"))"
}

stop() {
  local n=$1 s
  check_name "$n"; s=$(slot "$n")
  if [ -d "$ROOT" ] && answers "$n"; then
    ctl "$n" stop "$(inner_dir "$n")/rabbit.pid" >/dev/null 2>&1 || true
  fi
  for _ in $(seq 1 30); do port_open "$(amqp_port "$s")" || break; sleep 1; done
  if [ "${2:-}" = "--clean" ]; then $SUDO rm -rf "$(node_dir "$n")"; say "$(node_name "$n") stopped, files removed"
  else say "$(node_name "$n") stopped"; fi
}

case "${1:-}" in
  start) start "${2:-}" ;;
  stop) stop "${2:-}" "${3:-}" ;;
  status) check_name "${2:-}"; s=$(slot "$2")
          if port_open "$(amqp_port "$s")" && answers "$2"; then say "$2 up ($(node_name "$2"), AMQP $(amqp_port "$s"))"
          else say "$2 down"; exit 3; fi ;;
  info) shift; if [ $# -eq 0 ]; then mapfile -t all < <(names); info "${all[@]}"; else info "$@"; fi ;;
  uri) check_name "${2:-}"; echo "amqp://guest:guest@$BIND:$(amqp_port "$(slot "$2")")/" ;;
  ctl) check_name "${2:-}"; n=$2; shift 2; in_root rabbitmqctl -n "$(node_name "$n")" "$@" ;;
  *) echo "variant: usage: variant.sh start|stop [--clean]|status|uri|ctl NAME …, or info [NAME…]" >&2; exit 2 ;;
esac
