"""Exactly once at the Spark executor: kill -9 the process hosting it mid-stream, restart it with
the same checkpoint directory, and the outputs of every chain are those of the inline operators —
nothing lost, nothing produced twice (a redelivered output carries its old sequence number and
the same content)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lxml import etree

from executor_harness import TestingSink
from operator_cases import CHAINS, assert_same, photons
from per_item_operators import Pipeline, serialize
from spark_host import RESTART_CHAINS

pytestmark = pytest.mark.slow
HOST = Path(__file__).resolve().parents[2] / "spark_host.py"


def start(checkpoint: Path, source: Path, sink: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(HOST), str(checkpoint), str(source), str(sink)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group: the kill takes the JVM too


def test_killed_and_restarted_executor_neither_loses_nor_duplicates(tmp_path):
    items = photons(12000, seed=4, messy=True)
    source, sink, checkpoint = tmp_path / "in.txt", tmp_path / "out.tsv", tmp_path / "ckpt"
    source.write_text("\n".join(items) + "\n")
    host = start(checkpoint, source, sink)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and host.poll() is None:
        if sink.exists() and len(sink.read_text().splitlines()) >= 6:
            break
        time.sleep(0.05)
    assert host.poll() is None, host.stderr.read()
    os.killpg(host.pid, signal.SIGKILL)
    host.wait()
    before = len(sink.read_text().splitlines())
    again = start(checkpoint, source, sink)
    try:
        _, err = again.communicate(timeout=600)
    finally:
        if again.poll() is None:
            os.killpg(again.pid, signal.SIGKILL)
    assert again.returncode == 0, err
    assert "resuming input at item 0" not in err  # the restart continued, it did not start over
    outputs: dict[str, dict[int, str]] = {name: {} for name in RESTART_CHAINS}
    ended = set()
    lines = sink.read_text().splitlines()
    assert len(lines) > before
    for line in lines:
        stream, seq, texts, end = line.split("\t")
        for k, text in enumerate(json.loads(texts)):
            previous = outputs[stream].setdefault(int(seq) + k, text)
            assert previous == text, (stream, int(seq) + k)  # a redelivery is the same output
        if end == "1":
            ended.add(stream)
    assert ended == set(RESTART_CHAINS)
    for name in RESTART_CHAINS:
        got = outputs[name]
        assert sorted(got) == list(range(len(got))), name  # no gaps in the sequence
        expected = [serialize(v) for v in Pipeline(CHAINS[name]).run(etree.fromstring(t) for t in items)]
        assert_same(expected, [got[k] for k in range(len(got))])


def python_workers_of(pid: int) -> list[int]:
    """Spark's Python daemon and workers under a process (its JVM's children)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            if any(a.startswith(b"pyspark.") for a in argv):  # -m pyspark.daemon, not the JVM
                found.append(p)
        except OSError:
            pass
    return found


def test_a_micro_batch_whose_workers_die_is_run_again_without_loss_or_duplicates(tmp_path):
    """Spark's Python workers are killed under the executor between micro-batches: the next
    job fails or Spark replaces them, and either way the outputs continue, exactly once."""
    from superpeer.executors.spark.executor import SparkExecutor

    items = photons(3000, seed=8, messy=False)
    ops = CHAINS["count"]
    expected = [serialize(v) for v in Pipeline(ops).run(etree.fromstring(t) for t in items)]
    sink = TestingSink()  # (a repeated number carries the same output)
    ex = SparkExecutor("restarting", checkpoint_dir=tmp_path / "ckpt", trigger_ms=50, deliver=sink.deliver)
    ex.start()
    try:
        ex.install("w", tuple(ops), parent="p")
        ex.push("p", [], items[:1500], False)
        assert ex.wait_idle(300), ex.status()
        workers = python_workers_of(os.getpid())
        assert workers, "no Python worker found under this process"
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        ex.push("p", [], items[1500:], True)
        assert ex.wait_idle(300), ex.status()
        assert ex.status()["error"] is None and ex.status()["state"] == "ready"
    finally:
        ex.stop()
    assert_same(expected, sink.items("w"))  # (numbered without gaps)
