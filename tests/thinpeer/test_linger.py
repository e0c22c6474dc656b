"""``lingering``: a live source's items leave within the linger time; a fast one keeps full
batches; the source's error reaches the publisher after every item before it."""

from __future__ import annotations

import queue
import time

import pytest

from thinpeer.linger import AHEAD, FLUSH, lingering


def live(q: queue.Queue):
    while True:
        item = q.get()
        if item is None:
            return
        if isinstance(item, Exception):
            raise item
        yield item


def test_a_slow_source_flushes_after_the_linger_time():
    q: queue.Queue = queue.Queue()
    out = lingering(live(q), 0.05)
    q.put("a")
    assert next(out) == "a"
    started = time.monotonic()
    assert next(out) is FLUSH  # nothing more came: the batch goes, after about 50 ms
    waited = time.monotonic() - started
    assert 0.03 <= waited < 1.0
    q.put("b")
    q.put("c")
    got = [next(out), next(out)]
    assert got == ["b", "c"]
    q.put(None)
    assert list(out) == [FLUSH]


def test_a_fast_source_never_waits_and_keeps_its_order():
    items = [f"<i>{k}</i>" for k in range(3 * AHEAD + 5)]
    out = [x for x in lingering(iter(items), 0.05) if x is not FLUSH]
    assert out == items


def test_the_sources_error_comes_after_its_items():
    q: queue.Queue = queue.Queue()
    q.put("a")
    q.put(ValueError("line 3: broken"))
    out = lingering(live(q), 10.0)
    assert next(out) == "a"
    assert next(out) is FLUSH  # what came before the error goes out before it
    with pytest.raises(ValueError, match="line 3: broken"):
        next(out)


def test_closing_early_stops_the_reader():
    out = lingering(iter(range(10 * AHEAD)), 0.05)
    assert next(out) == 0
    out.close()  # the reader thread is told to stop and does not hang the process
