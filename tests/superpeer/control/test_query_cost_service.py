"""A super-peer answers costly or malformed queries cleanly: deep nesting is INVALID_ARGUMENT
with the position (it was INTERNAL, from a RecursionError), a 4,000-atom chain of comparisons is
analysed in well under the client's deadline (it took minutes), and an analysis that outlives
its deadline or its client stops with DEADLINE_EXCEEDED or CANCELLED."""

from __future__ import annotations

import re

import pytest

from deep_queries import DEEP
from network_harness import running_network
from superpeer.errors import NodeError
from thinpeer.client import SuperPeerClient, ThinPeerError
from wxquery.limits import QueryLimits


def chain_query(n: int, stream: str = "nope") -> str:
    atoms = " and ".join(f"$p/v{i} >= $p/v{i + 1} + 1" for i in range(n))
    return f'<r>{{ for $p in stream("{stream}")/s/i where {atoms} return <o>{{ $p/v0 }}</o> }}</r>'


def test_deep_nesting_is_invalid_argument_at_the_construct(tmp_path):
    with running_network(tmp_path) as (topology, peers):
        client = SuperPeerClient(topology.address("SP1"), timeout=60)
        for case, levels in (("constructors", 600), ("enclosed", 450), ("parentheses", 980)):
            build, opener = DEEP[case]
            text = build(levels)
            with pytest.raises(ThinPeerError) as deep:
                client.subscribe(text)
            assert deep.value.code == "INVALID_ARGUMENT", deep.value
            m = re.match(r"query:1:(\d+): error: query is nested too deeply: ", deep.value.message)
            assert m and text.startswith(opener, int(m.group(1)) - 1), deep.value.message


def test_a_long_chain_is_analysed_at_once_and_limits_are_configurable(tmp_path):
    with running_network(tmp_path) as (topology, peers):
        client = SuperPeerClient(topology.address("SP1"), timeout=60)
        # analysed (then refused because no super-peer has the stream), not stuck for minutes
        with pytest.raises(ThinPeerError) as unknown:
            client.subscribe(chain_query(4000))
        assert unknown.value.code == "NOT_FOUND", unknown.value
        peers["SP1"].node.control.query_limits = QueryLimits(max_comparisons=100)
        with pytest.raises(ThinPeerError) as too_many:
            client.subscribe(chain_query(101))
        assert too_many.value.code == "INVALID_ARGUMENT" and "max_comparisons" in too_many.value.message


def test_an_analysis_past_its_deadline_or_client_stops(tmp_path):
    with running_network(tmp_path) as (topology, peers):
        node = peers["SP1"].node
        with pytest.raises(NodeError) as cancelled:
            node.subscribe(chain_query(50), cancelled=lambda: True)
        assert cancelled.value.code == "CANCELLED"
        with pytest.raises(NodeError) as late:
            node.subscribe(chain_query(50), time_remaining=0.0)
        assert late.value.code == "DEADLINE_EXCEEDED" and "request's deadline" in late.value.message
        node.control.analysis_deadline_s = 0.0
        with pytest.raises(ThinPeerError) as capped:
            SuperPeerClient(topology.address("SP1")).subscribe(chain_query(50))
        assert capped.value.code == "DEADLINE_EXCEEDED"
        assert "analysis_deadline_s" in capped.value.message
        assert not node.control.subscriptions
