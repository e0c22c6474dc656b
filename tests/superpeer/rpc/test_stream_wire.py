"""Lookup answers with each stream's fixed part printed and read once (``stream_wire``)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sharing import scenarios
from sharing.planner import Strategy
from sharing.serialization import stream_to_json
from sharing.simulator import Simulation
from superpeer.rpc.stream_wire import StaticParses, StaticTexts


@pytest.fixture(scope="module")
def streams():
    sim = Simulation(scenarios.paper_example(), photons=300, verify=False)
    sim._push = lambda state, result: None
    return list(sim.run(Strategy.SHARING).state.streams.values())


def test_an_answer_reads_back_as_the_streams_it_was_printed_from(streams):
    texts, parses = StaticTexts(), StaticParses()
    for _ in range(2):  # (cold, then from the caches)
        got = parses.streams(texts.answer(streams))
        assert [stream_to_json(s) for s in got] == [stream_to_json(s) for s in streams]


def test_what_changes_in_a_stream_travels_with_every_answer(streams):
    texts, parses = StaticTexts(), StaticParses()
    s = streams[-1]
    parses.streams(texts.answer([s]))
    moved = dataclasses.replace(s, route=s.route[:1], users={"someone"})
    assert s.operators
    widened = dataclasses.replace(s, operators=())  # (changed in place under its id: printed anew)
    got = parses.streams(texts.answer([moved, widened]))
    assert got[0].route == s.route[:1] and got[0].users == {"someone"}
    assert got[1].operators == () and stream_to_json(got[1]) == stream_to_json(widened)
    assert json.loads(texts.answer([widened]))[0]["static"] != json.loads(texts.answer([s]))[0]["static"]
