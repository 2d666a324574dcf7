# Sourced by scripts/ensure-broker.sh, scripts/broker4.sh, scripts/variant.sh and rbench/faults/cluster.sh:
# the file-descriptor limit a RabbitMQ node boots with (docs/connections.md, "The broker's own limit").
#
# RabbitMQ holds one file descriptor per connection and reads its limit once, at boot (3.10: fd_total, and
# sockets_total about 0.9 of it; 4.0: fd_total). Debian's wrapper (/usr/sbin/rabbitmq-server, run as root)
# starts the node through `su rabbitmq`, and su's PAM session (pam_limits) sets the soft RLIMIT_NOFILE back
# to 1024 whatever the caller had: `ulimit -S -n 20000; su rabbitmq -s /bin/sh -c 'ulimit -Sn'` prints 1024,
# so neither `ulimit -n` before rabbitmq-server nor /etc/default/rabbitmq-server (read by the init script
# only) reaches the node. What su does apply is a limits.d entry for the rabbitmq user, so that is what
# this writes, on the host and in the 4.0 root (its own /etc, its own su). The value: RBENCH_BROKER_NOFILE,
# else the caller's hard limit (a container's ceiling; su cannot go above it). A running node keeps the
# limit it booted with: restart it to apply (prlimit on the beam does not help, the VM sized its tables then).

broker_nofile_wanted() {
  local hard
  hard=$(ulimit -Hn)
  [ "$hard" = unlimited ] && hard=1048576
  echo "${RBENCH_BROKER_NOFILE:-$hard}"
}

# broker_nofile ROOT: write ROOT/etc/security/limits.d/rbench-rabbitmq.conf (ROOT: / or a chroot) when it differs
broker_nofile() {
  local root=${1%/} n file body
  n=$(broker_nofile_wanted)
  file="$root/etc/security/limits.d/rbench-rabbitmq.conf"
  body="# written by rbench (rbench/faults/broker-fds.sh): the RabbitMQ node's file descriptors, one per connection
rabbitmq soft nofile $n
rabbitmq hard nofile $n"
  [ -f "$file" ] && [ "$(cat "$file")" = "$body" ] && return 0
  ${SUDO:-} mkdir -p "$(dirname "$file")"
  printf '%s\n' "$body" | ${SUDO:-} tee "$file" >/dev/null
}

# broker_nofile_of PID: the soft open-files limit a running process has
broker_nofile_of() { awk '/^Max open files/ {print $4}' "/proc/$1/limits" 2>/dev/null; }
