#!/usr/bin/env bash
# Entry point of the archive Spark image (k8s/spark/Dockerfile).
#
#   executor   start a Spark executor the way Spark's Kubernetes backend asks: it creates executor pods
#              with args [executor] and the SPARK_* variables below (the contract of Spark's own
#              resource-managers/kubernetes/docker/.../entrypoint.sh);
#   anything   run as given; the CronJob runs spark-submit in client mode, so the driver is this process.
set -euo pipefail

if [[ "${1:-}" == "executor" ]]; then
  shift
  # SPARK_JAVA_OPT_0..N carry the executor JVM's options (Java 17 module flags included), in order.
  readarray -t java_opts < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//' || true)
  classpath="${SPARK_HOME}/conf:${SPARK_HOME}/jars/*${SPARK_CLASSPATH:+:${SPARK_CLASSPATH}}"
  exec "${JAVA_HOME}/bin/java" "${java_opts[@]}" \
    "-Xms${SPARK_EXECUTOR_MEMORY}" "-Xmx${SPARK_EXECUTOR_MEMORY}" \
    -cp "${classpath}" \
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "${SPARK_DRIVER_URL}" \
    --executor-id "${SPARK_EXECUTOR_ID}" \
    --cores "${SPARK_EXECUTOR_CORES}" \
    --app-id "${SPARK_APPLICATION_ID}" \
    --hostname "${SPARK_EXECUTOR_POD_IP}" \
    --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
    --podName "${SPARK_EXECUTOR_POD_NAME}" \
    "$@"
fi

exec "$@"
