#!/bin/sh
# A Spark standalone master or worker, from the pyspark installed in the image (it ships the
# spark-class launcher), in the foreground, as the unprivileged user "streamglobe".
#   spark.sh master HOST PORT UI_PORT
#   spark.sh worker MASTER_URL HOST CORES MEMORY UI_PORT
set -eu
SPARK_HOME=$(python3 -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
export SPARK_HOME SPARK_NO_DAEMONIZE=1
as_user="setpriv --reuid=streamglobe --regid=streamglobe --init-groups"
role=$1
shift
case "$role" in
master)
    exec $as_user "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
        --host "$1" --port "$2" --webui-port "$3" ;;
worker)
    exec $as_user env HOME=/home/streamglobe "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
        --host "$2" --cores "$3" --memory "$4" --webui-port "$5" --work-dir /home/streamglobe/spark-work "$1" ;;
*)
    echo "spark.sh: unknown role $role (master or worker)" >&2
    exit 2 ;;
esac
