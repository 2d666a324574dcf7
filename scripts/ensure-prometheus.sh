#!/usr/bin/env bash
# Make sure the Prometheus server, promtool and the Pushgateway are installed (Debian packages).
# Tests start them as child processes on free ports with temporary config and storage: never as
# system services (the packages' units are left alone; nothing is started here).
set -euo pipefail
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v prometheus-pushgateway >/dev/null 2>&1 || missing+=(prometheus-pushgateway)
if [ ${#missing[@]} -gt 0 ]; then
  echo "prometheus: installing ${missing[*]}"
  $SUDO apt-get update -qq
  # no recommends: the node exporter would start as a service where systemd runs
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
fi
echo "prometheus: $(prometheus --version 2>&1 | head -1)"
