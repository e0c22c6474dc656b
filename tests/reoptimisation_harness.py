"""Shared by the in-process re-optimisation tests (``tests/superpeer/control``): eight super-peers
in one process on the fake transport, photons registered at SP4, published batch by batch while
the test runs rounds and switches between batches, results checked against the reference
evaluator over the items published from each subscription's start."""

from __future__ import annotations

from collections.abc import Iterator

from superpeer_fakes import FakeNetwork, in_process_network

from photons.generator import generate
from sharing.analysis import analyze
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

PHOTONS = [p.to_xml() for p in generate(4000, seed=11)]
WARMUP = 200


def ranged(lo: float, hi: float, en: float | None = None) -> str:
    energy = f" and $p/en >= {en}" if en is not None else ""
    return f"""<r>{{ for $p in stream("photons")/photons/photon
      where $p/coord/cel/ra >= {lo} and $p/coord/cel/ra <= {hi}{energy}
      return <x>{{ $p/coord/cel/ra }}{{ $p/en }}{{ $p/det_time }}</x> }}</r>"""


def photon_network() -> Iterator[FakeNetwork]:
    """A fixture's body: the network with the photons registered and warmed up, stopped after."""
    network = in_process_network()
    sp4 = network.peers["SP4"]
    sp4.control.register_stream("photons", "photons", "photon", rate=100)
    sp4.data.publish("photons", PHOTONS[:WARMUP])
    yield network
    for p in network.peers.values():
        p.stop()


class Feed:
    """Publishes the photons in batches, running what each step asks between batches."""

    def __init__(self, net: FakeNetwork) -> None:
        self.net, self.at = net, WARMUP

    def publish(self, n: int, between=lambda: None, batch: int = 50) -> None:
        for k in range(self.at, self.at + n, batch):
            self.net.peers["SP4"].data.publish("photons", PHOTONS[k:min(k + batch, self.at + n)])
            between()
        self.at += n

    def close(self) -> None:
        self.net.peers["SP4"].data.close_stream("photons")


def hear(net: FakeNetwork) -> None:
    """What one heartbeat round tells every peer of the others' usage (with their versions)."""
    for p in net.peers.values():
        for q in net.peers.values():
            if q is not p:
                p.state.peer_usage[q.state.id] = q.state.usage_report()


def reference(query: str, first: int, last: int) -> list[str]:
    doc = StreamDocument.from_text("<photons>" + "".join(PHOTONS[first:last]) + "</photons>")
    return list(evaluate(analyze(query).checked, doc).serialized_items())


def link_items(net: FakeNetwork) -> int:
    return sum(s.items for p in net.peers.values() for s in p.transport.senders.values())


def switch_all(net: FakeNetwork):
    def step() -> None:
        for p in net.peers.values():
            p.reoptimiser.finish_switches()
    return step
