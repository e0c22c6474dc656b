"""The stream table shared by the simulator and the daemons: users, lineage, derived index,
release, truncation and usage."""

from __future__ import annotations

from sharing.cost_model import Usage
from sharing.matching import raw_properties
from sharing.properties import InputStream
from sharing.statistics import StreamEstimate
from sharing.stream_table import NetworkStream, StreamTable, lineage, link_load

PHOTONS = InputStream("photons", ("photons", "photon"))


def stream(sid: str, parent: str | None, route: tuple[str, ...], load: float = 0.0) -> NetworkStream:
    usage = Usage()
    if load:
        usage.add_peer(route[0], load)
    return NetworkStream(id=sid, input=PHOTONS, properties=raw_properties(PHOTONS), kind="items",
                         origin=route[0], parent=parent, operators=(), route=route,
                         estimate=StreamEstimate(10.0, 100.0), usage=usage, original=parent is None)


def table() -> StreamTable:
    t = StreamTable()
    t.add(stream("photons", None, ("A",)))
    t.add(stream("a", "photons", ("A", "B", "C"), load=0.25))
    t.add(stream("b", "a", ("B", "D"), load=0.5))
    return t


def test_users_follow_the_lineage_and_release_keeps_what_others_use():
    t = table()
    t.streams["a"].users.add("q1")
    t.add_user("q2", ["b"])
    assert [s.id for s in t.lineage("b")] == ["b", "a", "photons"]
    assert t.streams["a"].users == {"q1", "q2"} and t.streams["photons"].users == {"q2"}
    assert [s.id for s in t.release("q1")] == []
    assert [s.id for s in t.release("q2")] == ["a", "b"]
    assert list(t.streams) == ["photons"] and t.derived("photons") == []


def test_derived_index_and_lineage_over_a_partial_table():
    t = table()
    assert t.derived("a") == ["b"] and t.derived("a", at="B") == ["b"] and t.derived("a", at="A") == []
    partial = {"b": t.streams["b"]}
    assert [s.id for s in lineage(partial, "b")] == ["b"]


def test_truncate_and_usage():
    t = table()
    assert t.usage_at("A").load == 0.25 and t.usage_at("A").links == {"B": 8000.0}
    assert t.usage_at("B").links == {"C": 8000.0, "D": 8000.0} and t.usage_at("B").load == 0.5
    assert t.truncate("a", "B") == ("A", "B")
    assert t.truncate("a", "Z") is None and t.truncate("zz", "A") is None
    assert t.usage_at("B").links == {"D": 8000.0}
    extra = stream("c", "a", ("B",), load=1.0)
    assert t.usage_at("B", [extra]).load == 1.5
    assert [s.id for s in t.at("C", PHOTONS)] == []
    assert [s.id for s in t.at("B", PHOTONS)] == ["a", "b"]


def test_a_link_load_counts_both_directions_at_each_end():
    t = table()
    t.add(stream("back", "photons", ("C", "B", "A")))
    bits = 10.0 * 100.0 * 8
    assert link_load("B", t) == {"A": 2 * bits, "C": 2 * bits, "D": bits}
    assert link_load("A", t) == {"B": 2 * bits}


def test_an_end_is_recorded_once_and_forgotten_with_the_stream():
    t = table()
    assert not t.has_ended("a") and t.mark_ended("a") and t.has_ended("a")
    assert not t.mark_ended("a")  # the second end of a stream is not handled again
    assert not t.mark_ended("nowhere")
    version = t.version
    t.discard("a")
    assert not t.has_ended("a") and t.version > version
