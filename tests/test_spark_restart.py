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

from spark_host import RESTART_CHAINS
from test_batch_operators import CHAINS, assert_same, photons
from wxquery.inline_operators import Pipeline, serialize

pytestmark = pytest.mark.slow
HOST = Path(__file__).resolve().parent / "spark_host.py"


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
