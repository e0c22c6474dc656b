"""A move of a count window per key is refused before anything is installed: only a count over
all items can be aligned between two plans (a count per key has no one position to hand over)."""

from __future__ import annotations

from fractions import Fraction as F

from sharing.matching import raw_properties
from sharing.stream_properties import InputStream
from sharing.stream_table import NetworkStream, StreamEstimate
from superpeer.control.count_handover import CountHandover, handover_for
from wxquery.operators import definitions as alg

INPUT = InputStream("photons", ("photons", "photon"))


def counting(sid: str, key: str | None) -> NetworkStream:
    window = alg.WindowAggregate(alg.WindowSpec("count", F(4), F(4), key=key), (("sum", "en"),))
    return NetworkStream(id=sid, input=INPUT, properties=raw_properties(INPUT), kind="records", origin="SP4",
                         parent="photons", operators=(window,), route=("SP4",), estimate=StreamEstimate(1, 50))


def test_a_count_window_per_key_is_not_handed_over() -> None:
    for key in (None, "chip"):
        old, new = counting("old", key), counting("new", key)
        handover = handover_for({"old": old}, "old", "new", {"new": new})
        if key is None:
            assert isinstance(handover, CountHandover)
        else:
            assert isinstance(handover, str) and "per key" in handover
