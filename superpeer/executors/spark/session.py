"""The process's Spark session, and what the executor needs to know about its master."""

from __future__ import annotations

import os
import sys
import threading

_SESSION_LOCK = threading.Lock()
# The JVM only schedules tasks and passes bytes on (the operators run in Python workers), and
# C2, its optimising compiler, cost more CPU than all the rest of its work: 1.7 of the JVM's
# 2.5 CPU-seconds in a 600,000-photon run with 30 operators were compiler threads. With C1
# alone the JVM used 0.9 and the run was 18 % faster (``benchmarks/spark_executor.py``).
JVM_OPTIONS = os.environ.get("STREAMGLOBE_SPARK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


def is_cluster(master: str) -> bool:
    """Whether the master's executors run in other processes/hosts (not ``local[…]``)."""
    return not master.startswith("local")


def spark_session(master: str, driver_host: str | None = None, cores: int = 2):
    """The process's Spark session (one JVM per process; super-peers in one process share it).

    On a cluster master the driver must be reachable from the workers at ``driver_host`` (its
    default is whatever the host name resolves to, which in a container may be wrong), and the
    application takes at most ``cores`` cores (a standalone master otherwise gives the first
    application every core, and the next super-peer's waits forever), one per executor, so
    that the master spreads them over the workers.
    """
    from pyspark.sql import SparkSession

    with _SESSION_LOCK:
        builder = SparkSession.builder.master(master).appName("streamglobe")
        if is_cluster(master):
            builder = (builder.config("spark.cores.max", str(cores))
                       .config("spark.executor.cores", "1")
                       .config("spark.executor.memory",
                               os.environ.get("STREAMGLOBE_SPARK_EXECUTOR_MEMORY", "512m"))
                       .config("spark.driver.bindAddress", "0.0.0.0"))
            if driver_host:
                builder = builder.config("spark.driver.host", driver_host)
        builder = (builder
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", "2")
                   .config("spark.sql.adaptive.enabled", "false")
                   .config("spark.sql.execution.arrow.pyspark.enabled", "true")
                   .config("spark.python.worker.reuse", "true")
                   # JVM <-> Python workers over Unix domain sockets: over loopback TCP every
                   # task waited ~40 ms more (measured: a one-row Python task 79 -> 41 ms)
                   .config("spark.python.unix.domain.socket.enabled", "true")
                   # a Python worker that starts slowly (a loaded machine, eight JVMs on two
                   # cores) must not fail its query: the default 15 s wait for it to connect
                   # back was seen to expire, and the query died and restarted again and again
                   .config("spark.python.authenticate.socketTimeout", "180s")
                   .config("spark.pyspark.python", sys.executable)
                   .config("spark.pyspark.driver.python", sys.executable)
                   .config("spark.hadoop.fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem")
                   .config("spark.hadoop.fs.file.impl.disable.cache", "true")
                   .config("spark.driver.memory", os.environ.get("STREAMGLOBE_SPARK_MEMORY", "1g"))
                   .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
                   .config("spark.executor.extraJavaOptions", JVM_OPTIONS))
        # Spark's Python workers run the interpreter PySpark reads from PYSPARK_PYTHON, else
        # "python3" from PATH (``spark.pyspark.python`` reaches only spark-submit): a daemon
        # started by its full path from a venv that is not activated had workers without its
        # packages ("No module named 'superpeer'"). They run this daemon's own Python.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        return spark


def jvm_alive() -> bool:
    """Whether the process's Spark JVM (if it started one) still runs."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)  # the JVM pyspark launched (spark-submit execs it)
    return gateway is not None and (proc is None or proc.poll() is None)


def forget_dead_jvm() -> bool:
    """If the process's JVM died (killed, out of memory), drop its session and gateway, so that
    the next ``spark_session`` launches a new JVM; True if it had died. Every executor of the
    process then finds its context stopped and takes the new one."""
    import warnings

    from pyspark import SparkContext

    with _SESSION_LOCK:
        if SparkContext._gateway is None or jvm_alive():
            return False
        context = SparkContext._active_spark_context
        if context is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "unable to cleanly shut down": we know
                context.stop()
        SparkContext._gateway = None
        SparkContext._jvm = None
        return True


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:500]


def cores_of(master: str) -> int:
    """Task slots a micro-batch may spread a stream's work over: N of ``local[N]``, else 2
    (a cluster application's default ``spark.cores.max``)."""
    inside = master[master.find("[") + 1:master.rfind("]")] if master.startswith("local[") else ""
    if inside == "*":
        return os.cpu_count() or 2
    return int(inside) if inside.isdigit() and int(inside) > 0 else 2


def cluster_status(master: str) -> dict:
    """On a cluster: how many executors the process's application holds. None while the loop
    runs is the one thing a user must see: the master has no free cores or memory for this
    super-peer, and its items wait in the feed until it has."""
    if not is_cluster(master):
        return {}
    try:
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
        infos = context.statusTracker().getExecutorInfos() if context is not None else []
    except Exception:  # noqa: BLE001 — the session is going down
        return {}
    executors = max(len(infos) - 1, 0)  # the driver is listed too
    shown: dict = {"cluster_executors": executors}
    if executors == 0:
        shown["warning"] = (f"no executors from {master} yet: the cluster has no free cores or "
                            "memory for this super-peer's application (items wait in the feed)")
    return shown
