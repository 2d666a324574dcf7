#!/usr/bin/env bash
# Headless Chromium screenshot of a report.html, to judge what its reader sees first.
# usage: scripts/screenshot-report.sh REPORT.html OUT.png [WIDTH,HEIGHT]   (default 1400,2400)
# Needs Debian's chromium (apt-get install -y chromium); --no-sandbox because CI and containers run as root.
set -euo pipefail
report=$(realpath "$1")
out=$(realpath -m "$2")
size=${3:-1400,2400}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z "$browser" ]]; then
  echo "screenshot-report: no chromium here; apt-get install -y chromium" >&2
  exit 2
fi
mkdir -p "$(dirname "$out")"
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
  --window-size="$size" --screenshot="$out" "file://$report" 2>/dev/null
echo "screenshot: $out"
