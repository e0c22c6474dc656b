"""Where a re-plan recomputes a subscription's input from (``sharing.replay``): the chain of
computed streams it read, each from the item it began with."""

from __future__ import annotations

import dataclasses

from sharing.matching import raw_properties
from sharing.properties import InputStream
from sharing.replay import ReplayInput, chain_of, resolve
from sharing.statistics import StreamEstimate
from sharing.stream_table import NetworkStream
from wxquery.operators import definitions as alg

PHOTONS = InputStream("photons", ("photons", "photon"))
KEEP_EN = (alg.Project(frozenset({"en"})),)


def stream(sid: str, parent: str | None, operators: tuple = ()) -> NetworkStream:
    return NetworkStream(id=sid, input=PHOTONS, properties=raw_properties(PHOTONS), kind="items",
                         origin="A", parent=parent, operators=operators, route=("A",),
                         estimate=StreamEstimate(10.0, 100.0), original=parent is None)


# photons → shared (computed by another subscription) → copy of it (this plan) → own (this plan)
STREAMS = {s.id: s for s in (stream("photons", None), stream("shared", "photons", KEEP_EN),
                             stream("copy", "shared"), stream("own", "copy", KEEP_EN))}


def test_the_chain_runs_from_the_original_to_the_delivered_stream() -> None:
    assert [s.id for s in chain_of("own", STREAMS)] == ["photons", "shared", "copy", "own"]
    assert chain_of("own", {k: v for k, v in STREAMS.items() if k != "photons"}) is None  # partial


def test_each_level_starts_where_its_stream_did_and_new_streams_follow_their_branch() -> None:
    chain = chain_of("own", STREAMS)
    # "shared" began at log item 120; the copy branched off it at its item 35
    replay = resolve(chain, {"copy", "own"}, {"shared": 120, "copy": 35}, read=None)
    assert [level.first for level in replay.levels] == [120, 35] and replay.read == 0
    assert replay.start == 120 and replay.drops() == [35, 0]
    assert ReplayInput.from_json(replay.to_json()) == replay


def test_a_reused_stream_read_directly_starts_at_the_item_read_first() -> None:
    chain = chain_of("shared", STREAMS)
    replay = resolve(chain, set(), {"shared": 120}, read=77)
    assert replay.start == 120 and replay.drops() == [77]
    assert resolve(chain, set(), {"shared": 120}, read=None) is None  # not known: fall back


def test_an_unknown_anchor_gives_no_replay_input() -> None:
    assert resolve(chain_of("own", STREAMS), {"copy", "own"}, {"copy": 35}, read=None) is None


def test_a_stream_on_a_new_computed_stream_begins_with_its_first_item() -> None:
    streams = dict(STREAMS) | {"more": dataclasses.replace(STREAMS["own"], id="more", parent="own")}
    replay = resolve(chain_of("more", streams), {"copy", "own", "more"}, {"shared": 120, "copy": 35}, read=None)
    assert [level.first for level in replay.levels] == [120, 35, 0]
