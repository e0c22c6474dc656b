"""What ``status`` shows of a Spark executor: its state, its micro-batches and failures, its
backlog (what back-pressure holds it to), its feed and, on a cluster, the cluster's workers;
and what tests and benchmarks read of it (window counters, waiting until it is idle)."""

from __future__ import annotations

import time

from wxquery.operators.windows import WindowCounters

from .session import cluster_status


def executor_status(ex) -> dict:
    """``ex``: a ``SparkExecutor`` (not imported: it calls this)."""
    state = "stopped" if ex._stopped else "ready" if ex.ready else "starting" if ex._loop is not None else "not started"
    return {"executor": "spark", "master": ex.master, "state": state, "running": ex.ready,
            "ready_after_s": ex.ready_after_s, "chains": len(ex.chains), "micro_batches": ex.batches,
            "redone_pieces": ex.redone_pieces, "failed_batches": ex.failed_batches,
            "start_failures": ex.start_failures, "last_start_failure": ex.last_start_failure,
            "spark_restarts": ex.spark_restarts, "delivery_failures": ex.delivery_failures,
            "last_delivery_error": ex.delivery_error, "last_batch_ms": round(ex.last_batch_ms, 1),
            "backlog_items": ex.feed.backlog(), "backlog_bytes": ex.feed.backlog_bytes,
            "checkpoint": str(ex.directory), "error": ex.error,
            "feed": "%s:%d" % ex.server.address if ex.server.address else None,
            "feed_rejected": ex.server.rejected,
            "watermarks": {"applied": ex.watermarks.applied, "waiting": len(ex.watermarks)},
            **(cluster_status(ex.master) if ex._loop is not None else {})}


def window_counters(ex) -> dict[str, WindowCounters]:
    """Per derived stream with a window: items dropped as late or without a reference."""
    with ex.lock:
        chains = dict(ex.chains)
        states = dict(ex.state.states)
    return {chain.stream: states[cid].clock.counters() if cid in states else WindowCounters()
            for cid, chain in chains.items() if chain.window is not None}


def wait_idle(ex, timeout: float) -> bool:
    """Until every item fed to ``ex`` is processed (tests and benchmarks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ex.processed >= ex.feed.end or not ex.chains:
            return True
        time.sleep(0.02)
    return False
