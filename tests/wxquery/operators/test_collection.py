"""The cycle collector is paused for a batch and resumed after, even when the batch fails, and
left paused if it was."""

from __future__ import annotations

import gc

import pytest

from wxquery.operators.collection import cycle_collection_paused


def test_the_collector_is_paused_inside_and_resumed_after_even_on_error():
    assert gc.isenabled()
    with cycle_collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with cycle_collection_paused():
            raise ValueError("a bad batch")
    assert gc.isenabled()


def test_a_collector_paused_by_someone_else_stays_paused():
    gc.disable()
    try:
        with cycle_collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
