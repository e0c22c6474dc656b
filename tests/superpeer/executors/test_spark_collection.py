"""The cycle collector is paused for a batch and resumed after, even when the batch fails;
overlapping pauses (the driver's threads) resume it when the last ends; left paused if it was."""

from __future__ import annotations

import gc
import threading

import pytest

from superpeer.executors.spark.collection import cycle_collection_paused


def test_the_collector_is_paused_inside_and_resumed_after_even_on_error():
    gc.enable()
    with cycle_collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with cycle_collection_paused():
            raise ValueError("a bad batch")
    assert gc.isenabled()


def test_overlapping_pauses_resume_the_collector_when_the_last_ends():
    gc.enable()
    first_in, second_out = threading.Event(), threading.Event()

    def other() -> None:
        with cycle_collection_paused():
            first_in.set()
            assert second_out.wait(10)
            assert not gc.isenabled()  # the other pause ended: still paused for this one

    t = threading.Thread(target=other)
    t.start()
    assert first_in.wait(10)
    with cycle_collection_paused():
        pass
    second_out.set()
    t.join(10)
    assert gc.isenabled()


def test_a_collector_paused_by_someone_else_stays_paused():
    gc.disable()
    try:
        with cycle_collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
