"""The super-peer's parts start in order and stop in reverse order (``lifecycle``, ``node``)."""

from __future__ import annotations

import pytest

from sharing.scenarios import paper_example_backbone
from superpeer.lifecycle import Parts
from superpeer.node import Node, NodeSettings
from superpeer.topology import Topology
from superpeer_fakes import FakeNetwork, FakeTransport, in_process_network


class Part:
    def __init__(self, name: str, log: list[str], fails: bool = False) -> None:
        self.name, self.log, self.fails = name, log, fails

    def start(self) -> None:
        if self.fails:
            raise RuntimeError(f"{self.name} cannot start")
        self.log.append(f"start {self.name}")

    def stop(self) -> None:
        self.log.append(f"stop {self.name}")


def test_parts_stop_in_reverse_order_and_once() -> None:
    log: list[str] = []
    parts = Parts([(n, Part(n, log)) for n in "abc"])
    parts.start()
    parts.stop()
    parts.stop()
    assert log == ["start a", "start b", "start c", "stop c", "stop b", "stop a"]


def test_a_part_that_cannot_start_stops_those_started_before_it() -> None:
    log: list[str] = []
    parts = Parts([("a", Part("a", log)), ("b", Part("b", log, fails=True)), ("c", Part("c", log))])
    with pytest.raises(RuntimeError):
        parts.start()
    assert log == ["start a", "stop b", "stop a"]  # (b stops what it had started of itself)


def test_a_node_is_built_without_starting_anything_and_starts_its_parts_in_order() -> None:
    network = FakeNetwork(paper_example_backbone())
    node = Node("SP4", Topology(network.backbone, {}), NodeSettings(), transport=FakeTransport("SP4", network))
    assert node.parts.started == [] and not node.heartbeats._thread  # (a constructor only stores)
    assert node.parts.names() == ["subscriptions", "transport", "executor", "replays", "recovery", "re-optimisation",
                                  "heartbeats", "metrics"]
    node.start()
    try:
        assert [name for name, _ in node.parts.started] == node.parts.names()
    finally:
        node.stop()
    assert node.parts.started == []


def test_the_in_process_peers_are_the_daemons_nodes() -> None:
    network = in_process_network()
    try:
        assert all(type(p) is Node and isinstance(p.transport, FakeTransport) for p in network.peers.values())
        status = network.peers["SP4"].status()
        assert status["superpeer"] == "SP4" and status["cut_links"] == [] and status["subscriptions"] == {}
    finally:
        for p in network.peers.values():
            p.stop()
