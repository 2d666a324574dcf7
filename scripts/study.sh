#!/usr/bin/env bash
# The seeds' studies, rerun: `study.sh 004` / `study.sh 000` (make study-004 / make study-000; docs/studies/).
#
#   004: the brokers 3.10 (make broker), 4.0 (scripts/broker4.sh) and the `tuned` variant (scripts/variant.sh);
#        rbench compare on conf/studies/seed-004/amqp10-classic-3.10-4.0.yaml and amqp10-quorum-default-tuned.yaml,
#        rbench run of perftest-091-4.0.yaml twice; then the tables and the bar chart.
#   000: 3.10, 4.0 and the `khepri` variant; rbench scalability on conf/studies/seed-000/sweep-*.yaml; then the
#        tables (medians, slopes, ratios paired by level with 95 % intervals) and the bar chart; then the 4.0 and
#        khepri sweeps again with queues up to 256 (STUDY_CREATE_FLAGS) for the create cost.
# Sizes (defaults fit each study in about 5 minutes on 2 shared cores): STUDY_ROUNDS (3), RBENCH_STUDY_DURATION
# (10s per compare run), RBENCH_STUDY_COUNT (100000 PerfTest messages). STUDY_OUT (results/studies) holds the runs;
# STUDY_DOCS (docs/studies) gets seed-NNN-results.md and seed-NNN.png. RBENCH (the rbench command) and
# STUDY_MASTER (local[2]) as for any run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
STUDY="${1:-}"
OUT="${STUDY_OUT:-results/studies}/seed-$STUDY-$(date -u +%Y%m%d-%H%M%S)"
DOCS="${STUDY_DOCS:-docs/studies}"
ROUNDS="${STUDY_ROUNDS:-3}"
MASTER="${STUDY_MASTER:-local[2]}"
read -r -a PY <<<"${PYTHON:-python3}"
read -r -a RBENCH <<<"${RBENCH:-rbench}"
export RBENCH_STUDY_DURATION="${RBENCH_STUDY_DURATION:-10s}" RBENCH_STUDY_COUNT="${RBENCH_STUDY_COUNT:-100000}"

say() { echo "study $STUDY: $*"; }
newest() { ls -1d "$1"/*/ 2>/dev/null | sort | tail -1 | sed 's:/$::'; }

brokers() {     # the system broker, 4.0 and the named variants, each started only when it does not answer
  (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null || bash scripts/ensure-broker.sh >/dev/null
  bash scripts/broker4.sh start
  local v
  for v in "$@"; do bash scripts/variant.sh start "$v"; done
}

study_004() {
  brokers tuned
  local d=conf/studies/seed-004
  "${RBENCH[@]}" compare "$d/amqp10-classic-3.10-4.0.yaml" --rounds "$ROUNDS" --out "$OUT/classic" --master "$MASTER" --quiet
  "${RBENCH[@]}" compare "$d/amqp10-quorum-default-tuned.yaml" --rounds "$ROUNDS" --out "$OUT/quorum" --master "$MASTER" --quiet
  local runs=() i
  for i in 1 2; do
    "${RBENCH[@]}" run "$d/perftest-091-4.0.yaml" --out "$OUT/perftest-$i" --master "$MASTER" --quiet
    runs+=(--run "classic 0.9.1, 4.0 PerfTest#$i=$(newest "$OUT/perftest-$i")")
  done
  mkdir -p "$DOCS"
  "${PY[@]}" scripts/study_tables.py seed-004 --compare "classic=$(newest "$OUT/classic")" \
      --compare "quorum=$(newest "$OUT/quorum")" "${runs[@]}" --md "$DOCS/seed-004-results.md" --png "$DOCS/seed-004.png" \
      --seed "rabbitmq-3.10-plugin=classic 1.0, 3.13 plugin" --seed "rabbitmq-4.0-native=classic 1.0, 4.0 native" \
      --seed "classic 0.9.1, 4.0 PerfTest=classic 0.9.1, 4.0 PerfTest" \
      --seed "rabbitmq-4.0-default=quorum 1.0, 4.0 default" --seed "rabbitmq-4.0-tuned=quorum 1.0, 4.0 tuned"
}

study_000() {
  brokers khepri
  local d=conf/studies/seed-000 name args=()
  for name in 3.10 4.0 4.0-khepri; do
    "${RBENCH[@]}" scalability "$d/sweep-$name.yaml" --out "$OUT/$name" --master "$MASTER" --quiet
    args+=(--sweep "rabbitmq-$name=$(newest "$OUT/$name")")
  done
  mkdir -p "$DOCS"
  "${PY[@]}" scripts/study_tables.py seed-000 "${args[@]}" --pair rabbitmq-3.10:rabbitmq-4.0 \
      --pair rabbitmq-4.0:rabbitmq-4.0-khepri --md "$DOCS/seed-000-results.md" --png "$DOCS/seed-000.png"
  # Queue creation under Mnesia and Khepri, at populations up to 256 queues (one binding each): more queues per
  # level than the sweep above, so a level's figure is less one RPC's luck. STUDY_CREATE_FLAGS changes it.
  args=()
  for name in 4.0 4.0-khepri; do
    # shellcheck disable=SC2086
    "${RBENCH[@]}" scalability "$d/sweep-$name.yaml" ${STUDY_CREATE_FLAGS:--x 9 -y 1 -c 8 -n 20} \
        --out "$OUT/create-$name" --master "$MASTER" --quiet
    args+=(--sweep "rabbitmq-$name=$(newest "$OUT/create-$name")")
  done
  "${PY[@]}" scripts/study_tables.py seed-000 "${args[@]}" --pair rabbitmq-4.0:rabbitmq-4.0-khepri \
      --md "$DOCS/seed-000-create-results.md" --png "$DOCS/seed-000-create.png"
}

case "$STUDY" in
  004) study_004 ;;
  000) study_000 ;;
  *) echo "study: usage: study.sh 004|000" >&2; exit 2 ;;
esac
say "runs in $OUT; tables in $DOCS/seed-$STUDY-results.md"
