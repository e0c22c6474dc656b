"""Executors: ``inline`` (in-process) and ``spark`` (a Spark job per micro-batch), one interface.

``spark`` is imported only when asked for, so a super-peer on the inline executor never loads
pyspark.
"""

from __future__ import annotations

from .base import Deliver, Executor, Passed
from .inline import InlineExecutor

__all__ = ["Deliver", "Executor", "InlineExecutor", "Passed", "make_executor"]


def make_executor(name: str, peer: str = "", deliver: Deliver | None = None, passed: Passed | None = None,
                  **options) -> Executor:
    """``deliver``: where the derived streams' outputs go (nowhere if None); ``passed``: where
    an asynchronous executor says a watermark has passed a stream (spark; the inline one's
    have passed when ``advance`` returns); ``options``: lateness (both); master,
    checkpoint_dir, trigger_ms, feed_host, cores (spark). None: the default."""
    options = {k: v for k, v in options.items() if v is not None}
    if name == "inline":
        return InlineExecutor(deliver=deliver, **{k: v for k, v in options.items() if k == "lateness"})
    if name == "spark":
        from .spark.executor import SparkExecutor

        return SparkExecutor(peer, deliver=deliver, passed=passed, **options)
    raise ValueError(f"unknown executor {name!r}; use inline or spark")
