#!/usr/bin/env bash
# Entry point of the rbench image (Dockerfile). Spark on Kubernetes starts its pods with a first
# argument naming the role; anything else runs as given (spark-submit, rbench, bash ...).
#   executor: the executor JVM, configured from the SPARK_* variables the driver put in the pod
#   driver:   a cluster-mode driver (spark-operator), i.e. spark-submit in client mode inside the pod
set -euo pipefail

role=${1:-}
case "$role" in
  executor)
    shift
    # Spark passes executor JVM options as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in order
    java_opts=()
    while IFS= read -r name; do
      java_opts+=("${!name}")
    done < <(env | sed -n 's/^\(SPARK_JAVA_OPT_[0-9]*\)=.*/\1/p' | sort -t_ -k4 -n)
    exec java "${java_opts[@]}" \
      -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
      -cp "${SPARK_CONF_DIR:-/opt/spark/conf}:${SPARK_HOME}/jars/*" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL}" \
      --executor-id "${SPARK_EXECUTOR_ID}" \
      --cores "${SPARK_EXECUTOR_CORES}" \
      --app-id "${SPARK_APPLICATION_ID}" \
      --hostname "${SPARK_EXECUTOR_POD_IP}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME:-$HOSTNAME}"
    ;;
  driver)
    shift
    exec spark-submit --deploy-mode client \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:-0.0.0.0}" "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
