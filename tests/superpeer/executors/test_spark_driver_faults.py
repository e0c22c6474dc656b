"""Faults in the Spark executor's driver, with real Spark: a checkpoint that cannot be written, a
node that refuses an output and a task that raises. The loop must survive each, say what went
wrong in its status, and keep the outputs exactly once (a failed checkpoint must not leave window
state half-changed, or the batch run again would count its items twice)."""

from __future__ import annotations

import time

import pytest
from lxml import etree

from executor_harness import TestingSink
from operator_cases import CHAINS, assert_same, photons
from per_item_operators import Pipeline, serialize

pytestmark = pytest.mark.slow


def until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def started(peer: str, directory, names: list[str]):
    """A Spark executor with the named chains on stream ``p``, and the outputs it delivers per
    stream by sequence number (a number delivered again must carry the same output)."""
    from superpeer.executors.spark.executor import SparkExecutor

    sink = TestingSink()  # (a number delivered again must carry the same output)
    ex = SparkExecutor(peer, checkpoint_dir=directory, trigger_ms=50, deliver=sink.deliver)
    ex.start()
    for name in names:
        ex.install(name, tuple(CHAINS[name]), parent="p")
    return ex, (sink, names)


def assert_exactly_once(got: tuple[TestingSink, list[str]], items: list[str]) -> None:
    sink, names = got
    for name in names:
        expected = [serialize(v) for v in Pipeline(CHAINS[name]).run(etree.fromstring(t) for t in items)]
        assert_same(expected, sink.items(name))  # (numbered without gaps)


def test_a_checkpoint_that_cannot_be_written_holds_the_stream_and_loses_or_repeats_nothing(tmp_path):
    items = photons(10000, seed=11, messy=True)  # batches of 6,000 and 2,000: cut into two ranges
    ex, got = started("faulty", tmp_path / "ckpt", ["count", "time-sliding"])
    seen_errors: list[str] = []
    try:
        ex.push("p", [], items[:6000], False)
        assert ex.wait_idle(300), ex.status()
        # the checkpoint's temporary file is a directory now: every write of the state fails
        blocker = tmp_path / "ckpt" / "driver" / "state.tmp"
        blocker.mkdir()
        ex.push("p", [], items[6000:8000], False)
        until(lambda: ex.status()["error"] is not None, 120, "the failed checkpoint in the status")
        seen_errors.append(ex.status()["error"])
        assert ex.processed == 6000  # nothing of the failed batches was handed on or committed
        ex.push("p", [], items[8000:], True)
        blocker.rmdir()
        until(lambda: ex.processed >= ex.feed.end and ex.status()["error"] is None, 300,
              "every item through a micro-batch that was written")
        assert len(ex.state.states) == 2 and all(s.ended for s in ex.state.states.values())
        status = ex.status()
        assert status["error"] is None and status["failed_batches"] >= 1
    finally:
        ex.stop()
    assert "driver" in seen_errors[0] and "state.tmp" in seen_errors[0]
    assert_exactly_once(got, items)


def test_an_output_the_node_refuses_is_reported_and_the_loop_goes_on(tmp_path):
    from superpeer.executors.spark.executor import SparkExecutor

    items = photons(1000, seed=12, messy=False)
    delivered: list[str] = []
    ended: list[str] = []
    calls = [0]

    def deliver(stream, seq, texts, end):
        calls[0] += 1
        if calls[0] == 1:
            raise ConnectionError("the neighbour went away")
        delivered.extend(texts)
        if end:
            ended.append(stream)

    ex = SparkExecutor("refused", checkpoint_dir=tmp_path / "ckpt", trigger_ms=50, deliver=deliver)
    ex.start()
    try:
        ex.install("s", tuple(CHAINS["select-project"]), parent="p")
        ex.push("p", [], items[:500], False)
        until(lambda: ex.status()["delivery_failures"] == 1, 300, "the refused delivery")
        assert "the neighbour went away" in ex.status()["last_delivery_error"]
        ex.push("p", [], items[500:], True)
        # the driver folds a batch into its state before it hands the outputs on: wait for the end
        # as the node hears it, not as the state records it
        until(lambda: ended, 120, "the end handed on")
        assert ex._loop is not None and ex._loop.is_alive()
        assert delivered  # the later batches were handed on
    finally:
        ex.stop()


def test_a_failed_job_is_told_by_its_python_error_not_by_its_traceback_header(tmp_path):
    from superpeer.executors.spark.executor import SparkExecutor
    from superpeer.executors.spark.jobs import job_error

    def fails(index, iterator):  # nested: pickled by value, the workers cannot import this module
        raise ValueError("a task's own error")
        yield  # pragma: no cover — a generator, as mapPartitionsWithIndex wants

    ex = SparkExecutor("reasons", checkpoint_dir=tmp_path / "ckpt", trigger_ms=50)
    ex.start()
    try:
        until(lambda: ex.ready, 300, "Spark")
        with pytest.raises(Exception) as failed:
            ex.jobs._collect(1, fails)
        assert job_error(failed.value) == "ValueError: a task's own error"
    finally:
        ex.stop()


def test_a_spark_jvm_that_dies_is_replaced_and_the_stream_goes_on_exactly_once(tmp_path):
    """The JVM is killed (as the kernel's out-of-memory killer would) between micro-batches:
    the next job fails, the executor starts a new JVM, and the outputs continue exactly once."""
    import os
    import signal

    from pyspark import SparkContext

    items = photons(6000, seed=13, messy=True)
    ex, got = started("revived", tmp_path / "ckpt", ["count", "time-sliding", "select-project"])
    try:
        ex.push("p", [], items[:3000], False)
        assert ex.wait_idle(300), ex.status()
        jvm = SparkContext._gateway.proc
        os.kill(jvm.pid, signal.SIGKILL)
        jvm.wait(timeout=30)
        ex.push("p", [], items[3000:], True)
        until(lambda: ex.processed >= ex.feed.end and ex.status()["error"] is None, 600,
              "every item through a micro-batch on the new JVM")
        status = ex.status()
        assert status["spark_restarts"] == 1 and status["failed_batches"] >= 1, status
        assert SparkContext._gateway.proc.poll() is None  # the new JVM runs
    finally:
        ex.stop()
    assert_exactly_once(got, items)
