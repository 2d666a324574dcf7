#!/usr/bin/env bash
# A real N-node RabbitMQ cluster on one machine, for fault tests and for trying rbench locally
# (docs/faults.md). This file is the one source of the local cluster's layout: scripts/cluster.sh
# runs it, and rbench's local fault executor (rbench/faults/executor.py) runs the copy installed
# with the package, so `pip install rbench` needs no checkout.
#
#   cluster.sh start [N]          start N nodes (default 3) and cluster them; idempotent
#   cluster.sh stop [N] [--clean] stop every node (also half-dead ones); --clean removes their files
#   cluster.sh status [N]         one line per node; exit 0 when all N run, 3 otherwise
#   cluster.sh uris [N]           the nodes' AMQP URIs, one a line (guest/guest, the default user)
#   cluster.sh info [N]           the layout: node name, ports and directory, one node a line
#   cluster.sh kill I             SIGKILL node I's Erlang VM (a crash)
#   cluster.sh start-node I       start node I again with its own settings; it rejoins the cluster
#   cluster.sh stop-node I        stop node I gracefully
#   cluster.sh pause I | resume I SIGSTOP / SIGCONT node I's VM (a hung node)
#
# The cluster is named rbench-local-3 (rbench-local-4 below). Node i is rabbit-i@localhost: AMQP 5700+i, management 15700+i, Prometheus 15790+i, streams
# 5560+i, Erlang distribution 25700+i, all on 127.0.0.1; its data, logs, configuration and
# enabled_plugins file live in ${RBENCH_CLUSTER_DIR:-/tmp/rbench-cluster}/rabbit-i. The nodes use
# the Erlang cookie rabbitmqctl uses for the invoking user (the Debian wrappers run both as the
# rabbitmq user when called by root), so `rabbitmqctl -n rabbit-2@localhost status` just works.
# The system broker (rabbit@localhost, 5672) is never touched.
#
# RBENCH_CLUSTER_VERSION=4 runs the same commands on a second layout: RabbitMQ 4.0 from the Debian trixie
# root that scripts/broker4.sh builds (`make broker-4`; 4.0 needs a newer libc than this machine's, so the
# nodes run chrooted there). Node i is then rabbit4-i@localhost: AMQP 5720+i, management 15720+i,
# Prometheus 15810+i, streams 5570+i, distribution 25720+i, files in /tmp/rbench-cluster4/rabbit4-i inside
# that root. Neither layout's ports clash with the other's, nor with broker4.sh's single node, so a 3.10
# cluster and a 4.0 cluster can run side by side.
set -uo pipefail
# shellcheck source=broker-fds.sh
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/broker-fds.sh"

# ---- the layout (the only place it is written) -------------------------------------------------
VERSION="${RBENCH_CLUSTER_VERSION:-3}"
case "$VERSION" in
  3) PREFIX=rabbit; PORT_OFFSET=0; STREAM_OFFSET=0; CHROOT=""
     PLUGINS="rabbitmq_management,rabbitmq_prometheus,rabbitmq_stream,rabbitmq_amqp1_0"
     INNER_BASE="${RBENCH_CLUSTER_DIR:-/tmp/rbench-cluster}" ;;
  4) PREFIX=rabbit4; PORT_OFFSET=20; STREAM_OFFSET=10; CHROOT="${RBENCH_BROKER4_ROOT:-/var/lib/rbench/rabbitmq-4}"
     PLUGINS="rabbitmq_management,rabbitmq_prometheus,rabbitmq_stream"      # AMQP 1.0 is built into 4.x
     INNER_BASE="${RBENCH_CLUSTER_DIR:-/tmp/rbench-cluster4}" ;;
  *) echo "cluster: RBENCH_CLUSTER_VERSION: expected 3 (the system's RabbitMQ) or 4 (RabbitMQ 4.0), got '$VERSION'" >&2; exit 2 ;;
esac
CLUSTER_NAME="rbench-local-$VERSION"     # what every node reports as cluster_name (set at start)
BASE="$CHROOT$INNER_BASE"       # where this script sees the nodes' files; the nodes see INNER_BASE
DEFAULT_NODES=3
MAX_NODES=9                     # one machine, one-digit names; the port ranges would allow more
HOST=localhost
BIND=127.0.0.1
MEMORY="${RBENCH_CLUSTER_MEMORY:-1GiB}"     # vm_memory_high_watermark.absolute per node
BOOT_TIMEOUT=180                # seconds a node may take to boot (2 shared cores, cold caches)
STOP_TIMEOUT=60

node_name() { echo "$PREFIX-$1@$HOST"; }
amqp_port() { echo $((5700 + PORT_OFFSET + $1)); }
mgmt_port() { echo $((15700 + PORT_OFFSET + $1)); }
prom_port() { echo $((15790 + PORT_OFFSET * 3 / 2 + $1)); }      # 15791… (3.x), 15821… (4.x)
stream_port() { echo $((5560 + STREAM_OFFSET + $1)); }
dist_port() { echo $((25700 + PORT_OFFSET + $1)); }
node_dir() { echo "$BASE/$PREFIX-$1"; }                          # as this script sees it
inner_dir() { echo "$INNER_BASE/$PREFIX-$1"; }                   # as the node and rabbitmqctl see it
pid_file() { echo "$(node_dir "$1")/rabbit.pid"; }
inner_pid_file() { echo "$(inner_dir "$1")/rabbit.pid"; }

die() { echo "cluster: $*" >&2; exit 1; }
say() { echo "cluster: $*"; }

# ---- the RabbitMQ commands ---------------------------------------------------------------------
# Debian's /usr/sbin wrappers refuse users other than root and rabbitmq; such a user runs the real
# scripts under /usr/lib/rabbitmq/bin directly (the nodes and rabbitmqctl then use ~/.erlang.cookie).
find_cmd() {
  local name=$1 path
  path=$(PATH="$PATH:/usr/sbin:/usr/local/sbin" command -v "$name" 2>/dev/null) || path=""
  if [ -n "$path" ] && [ "$(id -u)" -ne 0 ] && [ "$(id -un)" != rabbitmq ] \
      && grep -q "Only root or rabbitmq" "$path" 2>/dev/null && [ -x "/usr/lib/rabbitmq/bin/$name" ]; then
    path="/usr/lib/rabbitmq/bin/$name"
  fi
  [ -z "$path" ] && [ -x "/usr/lib/rabbitmq/bin/$name" ] && path="/usr/lib/rabbitmq/bin/$name"
  echo "$path"
}

need_rabbitmq() {
  if [ -n "$CHROOT" ]; then
    [ -f "$CHROOT/.rbench-ready" ] || die "RabbitMQ 4.0's root $CHROOT is not built; run 'make broker-4' (scripts/broker4.sh) first"
    mountpoint -q "$CHROOT/proc" || mount -t proc proc "$CHROOT/proc" || die "cannot mount /proc in $CHROOT"
    mountpoint -q "$CHROOT/dev" || mount --bind /dev "$CHROOT/dev" || die "cannot mount /dev in $CHROOT"
    [ "$(id -u)" -eq 0 ] && broker_nofile "$CHROOT"     # file descriptors: one per connection (broker-fds.sh)
    SERVER=(chroot "$CHROOT" env HOME=/var/lib/rabbitmq /usr/sbin/rabbitmq-server)
    CTL=(chroot "$CHROOT" env HOME=/var/lib/rabbitmq /usr/sbin/rabbitmqctl)
    return 0
  fi
  [ "$(id -u)" -eq 0 ] && broker_nofile /
  SERVER=("$(find_cmd rabbitmq-server)")
  CTL=("$(find_cmd rabbitmqctl)")
  if [ -z "${SERVER[0]}" ] || [ -z "${CTL[0]}" ]; then
    die "rabbitmq-server is not installed; install it with 'sudo apt-get install rabbitmq-server' (Debian/Ubuntu) or see https://www.rabbitmq.com/download.html"
  fi
}

ctl() { local i=$1; shift; "${CTL[@]}" -q -n "$(node_name "$i")" "$@"; }

# ---- processes ---------------------------------------------------------------------------------
# The node's OS pid: the pid file RabbitMQ writes at boot, checked against the process's environment
# (3.10 sets the node name at run time, not on the command line; a stale file must never make us
# signal an unrelated process), else the beam process whose environment names the node.
is_node_pid() { { tr '\0' '\n' <"/proc/$1/environ"; } 2>/dev/null | grep -qx "RABBITMQ_NODENAME=$2"; }

node_pid() {
  local i=$1 pid name
  name=$(node_name "$i")
  pid=$(cat "$(pid_file "$i")" 2>/dev/null || true)
  if [ -n "$pid" ] && is_node_pid "$pid" "$name"; then echo "$pid"; return 0; fi
  for pid in $(pgrep -x beam.smp 2>/dev/null; pgrep -x beam 2>/dev/null); do
    is_node_pid "$pid" "$name" && { echo "$pid"; return 0; }
  done
  return 1
}

proc_state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null; }     # R, S, D, T (stopped) …

port_open() { (exec 3<>"/dev/tcp/$BIND/$1") 2>/dev/null; }

wait_gone() {   # pid, seconds
  local pid=$1 limit=$2 t=0
  while [ -d "/proc/$pid" ] && [ "$(proc_state "$pid")" != Z ]; do
    [ "$t" -ge $((limit * 10)) ] && return 1
    sleep 0.1; t=$((t + 1))
  done
  return 0
}

check_ports() {
  local i=$1 what port
  for what in "AMQP:$(amqp_port "$i")" "management:$(mgmt_port "$i")" "Prometheus:$(prom_port "$i")" \
              "streams:$(stream_port "$i")" "Erlang distribution:$(dist_port "$i")"; do
    port=${what##*:}
    if port_open "$port"; then
      die "port $port (${what%:*} of $(node_name "$i")) is taken by another process; free it or stop that process"
    fi
  done
}

# ---- one node ----------------------------------------------------------------------------------
write_config() {
  local i=$1 dir
  dir=$(node_dir "$i")
  mkdir -p "$dir/mnesia" "$dir/log"
  cat >"$dir/rabbitmq.conf" <<EOF
# written by rbench's cluster.sh; node $(node_name "$i")
listeners.tcp.1 = $BIND:$(amqp_port "$i")
management.tcp.ip = $BIND
management.tcp.port = $(mgmt_port "$i")
prometheus.tcp.ip = $BIND
prometheus.tcp.port = $(prom_port "$i")
stream.listeners.tcp.1 = $BIND:$(stream_port "$i")
stream.advertised_host = $BIND
stream.advertised_port = $(stream_port "$i")
# the broker sampler reads per-second figures (docs/broker.md)
collect_statistics_interval = 1000
vm_memory_high_watermark.absolute = $MEMORY
# a SIGSTOPped node longer than net_ticktime comes back partitioned: heal without an operator
cluster_partition_handling = autoheal
log.file.level = info
log.console = false
EOF
  echo "[]." >"$dir/advanced.config"
  echo "# rbench cluster.sh: the node's settings come from its environment (cluster.sh node_env)" >"$dir/rabbitmq-env.conf"
  echo "[$PLUGINS]." >"$dir/enabled_plugins"
  # Debian's wrappers run the node as the rabbitmq user when root calls them (the root's own user in a chroot)
  if [ -n "$CHROOT" ]; then
    chroot "$CHROOT" chown -R rabbitmq: "$(inner_dir "$i")" "$INNER_BASE"
  elif [ "$(id -u)" -eq 0 ] && id rabbitmq >/dev/null 2>&1; then
    chown -R rabbitmq: "$dir" && chown rabbitmq: "$BASE"
  fi
}

node_env() {
  local i=$1 dir
  dir=$(inner_dir "$i")
  export RABBITMQ_NODENAME="$(node_name "$i")"
  export RABBITMQ_DIST_PORT="$(dist_port "$i")"
  export RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf"
  export RABBITMQ_ADVANCED_CONFIG_FILE="$dir/advanced.config"
  export RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf"
  export RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins"
  export RABBITMQ_MNESIA_BASE="$dir/mnesia"
  export RABBITMQ_LOG_BASE="$dir/log"
  export RABBITMQ_PID_FILE="$dir/rabbit.pid"
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
  export ERL_EPMD_ADDRESS="$BIND"
}

launch() {      # start node i's VM in the background (returns at once)
  local i=$1 dir
  dir=$(node_dir "$i")
  check_ports "$i"
  write_config "$i"
  rm -f "$(pid_file "$i")"
  ( cd "$dir" && node_env "$i" && exec "${SERVER[@]}" -detached ) </dev/null >"$dir/log/startup.log" 2>&1
}

await_boot() {  # wait until node i's rabbit application runs (`rabbitmqctl wait` reads the pid file the node writes)
  local i=$1
  if ! timeout $((BOOT_TIMEOUT + 10)) "${CTL[@]}" -q -n "$(node_name "$i")" wait "$(inner_pid_file "$i")" --timeout "$BOOT_TIMEOUT" >/dev/null 2>&1; then
    echo "cluster: $(node_name "$i") did not boot within $BOOT_TIMEOUT s; see $(node_dir "$i")/log" >&2
    return 1
  fi
}

# the cluster's member nodes as node i sees them (disk_nodes of cluster_status)
members() { ctl "$1" cluster_status --formatter json 2>/dev/null | sed -n 's/.*"disk_nodes":\[\([^]]*\)\].*/\1/p' | tr -d '"' | tr ',' '\n'; }
running_count() { ctl "$1" cluster_status --formatter json 2>/dev/null | sed -n 's/.*"running_nodes":\[\([^]]*\)\].*/\1/p' | tr ',' '\n' | grep -c @; }

join() {        # make node i a member of node 1's cluster, unless it is one
  local i=$1 seed
  seed=$(node_name 1)
  [ "$i" -eq 1 ] && return 0
  members "$i" | grep -qx "$seed" && return 0
  ctl "$i" stop_app >/dev/null || return 1
  if ! ctl "$i" join_cluster "$seed" >/dev/null 2>&1; then
    # a node left over from another cluster: forget its data, then join
    ctl "$i" reset >/dev/null && ctl "$i" join_cluster "$seed" >/dev/null || { ctl "$i" start_app >/dev/null; return 1; }
  fi
  ctl "$i" start_app >/dev/null && say "$(node_name "$i") joined $seed"
}

state() {       # running | paused | stopped
  local pid
  pid=$(node_pid "$1") || { echo stopped; return; }
  [ "$(proc_state "$pid")" = T ] && echo paused || echo running
}

# ---- commands ----------------------------------------------------------------------------------
nodes_arg() {   # N from the argument, else what the last start recorded, else the default
  local n=${1:-}
  [ -z "$n" ] && n=$(cat "$BASE/nodes" 2>/dev/null || echo "$DEFAULT_NODES")
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le "$MAX_NODES" ] || die "expected a node count from 1 to $MAX_NODES, got '$n'"
  echo "$n"
}

node_arg() {
  local i=${1:-}
  [[ "$i" =~ ^[0-9]+$ ]] && [ "$i" -ge 1 ] && [ "$i" -le "$MAX_NODES" ] || die "expected a node number from 1 to $MAX_NODES (rabbit-I), got '$i'"
  echo "$i"
}

cmd_start() {
  local n i t_start started=() failed=0
  n=$(nodes_arg "${1:-}") || exit 1
  need_rabbitmq
  t_start=$(date +%s.%N)
  mkdir -p "$BASE" || die "cannot create $BASE"
  touch "$BASE/.rbench-cluster"
  echo "$n" >"$BASE/nodes"
  for i in $(seq 1 "$n"); do
    case $(state "$i") in
      running) ;;
      paused) kill -CONT "$(node_pid "$i")"; say "$(node_name "$i") was paused: resumed" ;;
      stopped) launch "$i"; started+=("$i") ;;
    esac
  done
  # all at once: a node that was not the last to stop waits at boot for the others' tables
  local pids=()
  for i in "${started[@]}"; do await_boot "$i" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  [ "$failed" -eq 0 ] || die "not every node booted; 'cluster.sh stop $n' cleans up"
  # nodes that were running are members already, unless cluster_status says otherwise
  local check=("${started[@]}")
  [ "${#started[@]}" -eq 0 ] && [ "$(running_count 1)" = "$n" ] || check=($(seq 2 "$n"))
  for i in "${check[@]}"; do
    join "$i" || die "$(node_name "$i") could not join $(node_name 1); see $(node_dir "$i")/log"
  done
  for _ in $(seq 1 $((BOOT_TIMEOUT * 2))); do
    [ "$(running_count 1)" = "$n" ] && break
    sleep 0.5
  done
  [ "$(running_count 1)" = "$n" ] || die "cluster_status of $(node_name 1) does not show $n running nodes"
  # one name for the whole cluster: unset, each node reports its own default (rabbit4-2@<host> on 4.0), and
  # rbench's check that the sampled endpoints are the load's broker compares cluster names (docs/brokers.md)
  ctl 1 set_cluster_name "$CLUSTER_NAME" >/dev/null || die "cannot set the cluster name on $(node_name 1)"
  say "$n node(s) running ($(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}') s); AMQP URIs:"
  cmd_uris "$n"
}

stop_one() {    # graceful, then SIGKILL if it hangs; quiet when already stopped
  local i=$1 pid
  pid=$(node_pid "$i") || return 0
  [ "$(proc_state "$pid")" = T ] && kill -CONT "$pid"
  timeout $((STOP_TIMEOUT + 5)) "${CTL[@]}" -q -n "$(node_name "$i")" stop "$(inner_pid_file "$i")" >/dev/null 2>&1
  if ! wait_gone "$pid" "$STOP_TIMEOUT"; then
    kill -KILL "$pid" 2>/dev/null
    wait_gone "$pid" 10
    say "$(node_name "$i") did not stop within $STOP_TIMEOUT s: killed"
  fi
  return 0
}

cmd_stop() {
  local n="" clean=0 arg i pids=()
  for arg in "$@"; do
    case $arg in --clean) clean=1 ;; *) n=$arg ;; esac
  done
  n=$(nodes_arg "$n") || exit 1
  need_rabbitmq
  # every node directory there is, not only the first N: nothing may be left running
  local all
  all=$( (seq 1 "$n"; ls -d "$BASE/$PREFIX"-* 2>/dev/null | sed "s/.*$PREFIX-//") | grep -E '^[0-9]+$' | sort -un)
  for i in $all; do stop_one "$i" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p"; done
  for i in $all; do
    if node_pid "$i" >/dev/null; then die "$(node_name "$i") is still running"; fi
  done
  if [ "$clean" -eq 1 ] && [ -d "$BASE" ]; then
    [ -f "$BASE/.rbench-cluster" ] || die "$BASE was not made by cluster.sh: not removing it"
    rm -rf "$BASE/$PREFIX"-* "$BASE/nodes" "$BASE/.rbench-cluster"
    rmdir "$BASE" 2>/dev/null
    say "stopped; removed $BASE"
  else
    say "stopped"
  fi
}

cmd_status() {
  local n i s pid all=0
  n=$(nodes_arg "${1:-}") || exit 1
  for i in $(seq 1 "$n"); do
    s=$(state "$i")
    pid=$(node_pid "$i" || true)
    if [ "$s" = running ] && ! port_open "$(amqp_port "$i")"; then s="running (AMQP port $(amqp_port "$i") not open: booting or app stopped)"
    elif [ "$s" = running ]; then all=$((all + 1))
    fi
    echo "$(node_name "$i") $s${pid:+ pid $pid}"
  done
  [ "$all" -eq "$n" ] && return 0 || return 3
}

cmd_uris() {
  local n i
  n=$(nodes_arg "${1:-}") || exit 1
  for i in $(seq 1 "$n"); do echo "amqp://$BIND:$(amqp_port "$i")"; done
}

cmd_info() {
  local n i
  n=$(nodes_arg "${1:-}") || exit 1
  for i in $(seq 1 "$n"); do
    echo "$(node_name "$i") amqp=$(amqp_port "$i") management=$(mgmt_port "$i") prometheus=$(prom_port "$i")" \
         "stream=$(stream_port "$i") dist=$(dist_port "$i") dir=$(node_dir "$i")"
  done
}

cmd_kill() {
  local i pid
  i=$(node_arg "${1:-}") || exit 1
  pid=$(node_pid "$i") || die "$(node_name "$i") is not running"
  kill -KILL "$pid" || die "cannot SIGKILL $(node_name "$i") (pid $pid)"
  wait_gone "$pid" 10 || die "$(node_name "$i") (pid $pid) still exists 10 s after SIGKILL"
  say "$(node_name "$i") killed (pid $pid)"
}

cmd_start_node() {
  local i pid
  i=$(node_arg "${1:-}") || exit 1
  need_rabbitmq
  if pid=$(node_pid "$i"); then
    if [ "$(proc_state "$pid")" = T ]; then kill -CONT "$pid"; say "$(node_name "$i") was paused: resumed"; return 0; fi
    say "$(node_name "$i") already running (pid $pid)"; return 0
  fi
  # a node with data was a member (a kill or stop does not make it leave): it rejoins by itself
  local fresh=1
  [ -n "$(ls -A "$(node_dir "$i")/mnesia" 2>/dev/null)" ] && fresh=0
  launch "$i"
  await_boot "$i" || exit 1
  [ "$fresh" -eq 0 ] || join "$i" || die "$(node_name "$i") could not join $(node_name 1)"
  say "$(node_name "$i") started (pid $(node_pid "$i" || echo ?))"
}

cmd_stop_node() {
  local i pid
  i=$(node_arg "${1:-}") || exit 1
  need_rabbitmq
  pid=$(node_pid "$i") || die "$(node_name "$i") is not running"
  stop_one "$i"
  say "$(node_name "$i") stopped"
}

cmd_signal() {  # pause | resume
  local what=$1 i pid
  i=$(node_arg "${2:-}") || exit 1
  pid=$(node_pid "$i") || die "$(node_name "$i") is not running"
  if [ "$what" = pause ]; then
    kill -STOP "$pid" || die "cannot SIGSTOP $(node_name "$i") (pid $pid)"
    say "$(node_name "$i") paused (SIGSTOP pid $pid)"
  else
    kill -CONT "$pid" || die "cannot SIGCONT $(node_name "$i") (pid $pid)"
    say "$(node_name "$i") resumed (SIGCONT pid $pid)"
  fi
}

usage() {
  sed -n '7,15p' "$0" | sed 's/^# \{0,1\}//'
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  status) shift; cmd_status "$@" ;;
  uris) shift; cmd_uris "$@" ;;
  info) shift; cmd_info "$@" ;;
  kill) shift; cmd_kill "$@" ;;
  start-node) shift; cmd_start_node "$@" ;;
  stop-node) shift; cmd_stop_node "$@" ;;
  pause|resume) cmd_signal "$@" ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac
