#!/usr/bin/env bash
# Start or stop a one-machine Spark standalone cluster (one master, one worker) from the
# pyspark pip package, which ships spark-daemon.sh but not start-master.sh.
#   scripts/spark-standalone.sh start [PORT] [CORES]   → prints spark://127.0.0.1:PORT
#   scripts/spark-standalone.sh stop  [PORT]
# SPARK_START_TIMEOUT: seconds to wait for the worker to register (default 60).
# WORKER_PYTHON: the executors' default Python (default: PYTHON), e.g. one without rbench to show
# that spark-submit --archives dist/rbench-env.tar.gz#env ships everything (docs/cluster.md).
set -euo pipefail
ACTION=${1:?start or stop}
PORT=${2:-7177}
CORES=${3:-2}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$HERE/.venv/bin/python}
export SPARK_HOME=$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
export SPARK_LOCAL_IP=127.0.0.1
export SPARK_LOG_DIR=${SPARK_LOG_DIR:-/tmp/rbench-spark-$PORT/logs}
export SPARK_PID_DIR=${SPARK_PID_DIR:-/tmp/rbench-spark-$PORT/pids}
export SPARK_WORKER_DIR=${SPARK_WORKER_DIR:-/tmp/rbench-spark-$PORT/work}
export PYSPARK_PYTHON=${WORKER_PYTHON:-$PY}
DAEMON="$SPARK_HOME/sbin/spark-daemon.sh"
chmod +x "$DAEMON" "$SPARK_HOME"/bin/* "$SPARK_HOME"/sbin/* 2>/dev/null || true
MASTER_CLASS=org.apache.spark.deploy.master.Master
WORKER_CLASS=org.apache.spark.deploy.worker.Worker
INSTANCE=$PORT    # lets several clusters (ports) coexist

case "$ACTION" in
  start)
    mkdir -p "$SPARK_LOG_DIR" "$SPARK_PID_DIR" "$SPARK_WORKER_DIR"
    "$DAEMON" start $MASTER_CLASS "$INSTANCE" --host 127.0.0.1 --port "$PORT" --webui-port 0 >/dev/null
    "$DAEMON" start $WORKER_CLASS "$INSTANCE" --host 127.0.0.1 --webui-port 0 --cores "$CORES" --memory 2g \
      "spark://127.0.0.1:$PORT" >/dev/null
    for _ in $(seq 1 "${SPARK_START_TIMEOUT:-60}"); do
      if grep -qs "Successfully registered with master" "$SPARK_LOG_DIR"/*Worker*.out; then
        echo "spark://127.0.0.1:$PORT"; exit 0
      fi
      sleep 1
    done
    echo "spark-standalone: no worker registered within ${SPARK_START_TIMEOUT:-60} s (logs: $SPARK_LOG_DIR)" >&2; exit 1 ;;
  stop)
    "$DAEMON" stop $WORKER_CLASS "$INSTANCE" >/dev/null || true
    "$DAEMON" stop $MASTER_CLASS "$INSTANCE" >/dev/null || true ;;
  *) echo "usage: $0 start|stop [PORT] [CORES]" >&2; exit 2 ;;
esac
