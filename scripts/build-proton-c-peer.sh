#!/usr/bin/env bash
# Build bench/peers/proton_c_peer.c into build/proton-c-peer: the C AMQP 1.0 peer of `make bench-amqp10`
# (docs/amqp10.md). On a fresh Debian machine it installs the C library's headers (libqpid-proton11-dev)
# from apt first. When that is impossible it says so and leaves the peer out: the benchmark then runs
# without it and prints a note, rather than failing.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=bench/peers/proton_c_peer.c
OUT=build/proton-c-peer
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

if [ -x "$OUT" ] && [ "$OUT" -nt "$SRC" ]; then
  exit 0
fi
if ! pkg-config --exists libqpid-proton 2>/dev/null; then
  echo "proton-c-peer: installing libqpid-proton11-dev"
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
         libqpid-proton11-dev pkg-config gcc >/dev/null; }; then
    echo "proton-c-peer: could not install libqpid-proton11-dev; bench-amqp10 runs without the C peer" >&2
    exit 0
  fi
fi
mkdir -p build
cc -O2 -Wall -Wextra -o "$OUT" "$SRC" $(pkg-config --cflags --libs libqpid-proton)
echo "proton-c-peer: built $OUT"
