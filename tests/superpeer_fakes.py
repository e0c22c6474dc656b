"""Super-peers in one process, without gRPC: the real data plane, control plane and
participant of every peer, joined by a fake of the network transport (``PeerLink`` and the
forwarders' ``Sender``) that calls the other peer's handler directly, copies streams as the wire
would, records every call, can make a peer unreachable or refuse reservations, and can run a
test's action just before any call (to place a close or a failure at an exact point)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sharing.backbone import Backbone
from sharing.properties import InputStream
from sharing.scenarios import paper_example_backbone
from sharing.stream_table import NetworkStream
from superpeer.control.control_plane import ControlPlane
from superpeer.control.participant import Participant
from superpeer.data.data_plane import DataPlane
from superpeer.errors import NodeError
from superpeer.executors import make_executor
from superpeer.history.retention import ReplayHolds, Retention, log_replayer
from superpeer.node import LocalPeer
from superpeer.peer_state import PeerState
from superpeer.rpc.peer_channels import Committed, Reserved, Waiting, copy_stream


@dataclass
class Call:
    sender: str
    method: str
    peer: str
    args: tuple


@dataclass
class FakeNetwork:
    backbone: Backbone
    peers: dict[str, "InProcessPeer"] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    down: set[str] = field(default_factory=set)
    # (peer, call number) -> reason: the n-th reservation at that peer is refused
    refuse: Callable[[str, int], str] = lambda peer, n: ""
    reserves: dict[str, int] = field(default_factory=dict)
    forbidden: str = ""  # while set, any call is an error (e.g. while planning)
    # called with each call just before it reaches the peer
    hook: Callable[["Call"], None] = lambda call: None

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]


class FakeLink:
    """``PeerLink`` for one sender over a ``FakeNetwork``."""

    def __init__(self, sender: str, network: FakeNetwork) -> None:
        self.sender = sender
        self.network = network

    def _handler(self, method: str, peer: str, *args) -> LocalPeer | None:
        if self.network.forbidden:
            raise AssertionError(f"{method} to {peer} while {self.network.forbidden}")
        call = Call(self.sender, method, peer, args)
        self.network.calls.append(call)
        self.network.hook(call)
        if peer in self.network.down and peer != self.sender:
            return None
        return self.network.peers[peer].local

    def lookup(self, peer: str, input_stream: InputStream) -> tuple[list[NetworkStream], dict] | None:
        h = self._handler("lookup", peer, input_stream)
        if h is None:
            return None
        streams, usage = h.lookup(input_stream)
        return [copy_stream(s) for s in streams], usage

    def statistics(self, peer: str, name: str) -> dict:
        h = self._handler("statistics", peer, name)
        if h is None:
            raise NodeError("UNAVAILABLE", f"super-peer {peer} is unreachable")
        return h.statistics(name)

    def announce(self, peer: str, stream: NetworkStream) -> list[Waiting] | None:
        h = self._handler("announce", peer, stream.id)
        return None if h is None else h.announce(copy_stream(stream))

    def activate(self, peer: str, subscription: str) -> None:
        h = self._handler("activate", peer, subscription)
        if h is not None:
            h.activate(subscription)

    def reserve(self, peer: str, txn: str, streams: list[NetworkStream], subscription: str,
                target: str, version: int | None = None, attach: dict | None = None) -> Reserved:
        h = self._handler("reserve", peer, txn)
        if h is None:
            return Reserved(False, f"{peer} is unreachable")
        n = self.network.reserves[peer] = self.network.reserves.get(peer, 0) + 1
        reason = self.network.refuse(peer, n)
        if reason:
            return Reserved(False, reason)
        return h.reserve(txn, [copy_stream(s) for s in streams], subscription, target, version, attach)

    def commit(self, peer: str, txn: str, subscription: str, lineage: list[str],
               required: bool, replay: dict[str, int] | None = None,
               since: dict[str, float] | None = None) -> Committed:
        h = self._handler("commit", peer, txn, subscription)
        if h is None:
            if required:
                raise NodeError("UNAVAILABLE", f"super-peer {peer} is unreachable")
            return Committed({})
        return Committed.of(h.commit(txn, subscription, lineage, replay, since))

    def abort(self, peer: str, txn: str) -> bool | None:
        h = self._handler("abort", peer, txn)
        return h.abort(txn) if h is not None else None

    def remove(self, peer: str, subscription: str) -> list[str] | None:
        h = self._handler("remove", peer, subscription)
        return None if h is None else h.remove(subscription)

    def truncate(self, peer: str, stream: str, last: str) -> None:
        h = self._handler("truncate", peer, stream, last)
        if h is not None:
            h.truncate(stream, last)


class DirectSender:
    """A forwarder that hands the batch to the neighbour's data plane at once (in order)."""

    def __init__(self, network: FakeNetwork, neighbour: str, sender: str = "") -> None:
        self.network = network
        self.neighbour = neighbour
        self.sender = sender
        self.items = 0

    def send(self, stream: str, items: list[str], end: bool = False, position: int | None = None) -> None:
        self.items += len(items)
        self.network.peers[self.neighbour].data.transfer(stream, list(items), end, self.sender, first=position)

    def send_watermark(self, stream: str, path: str, value: float) -> None:
        self.network.peers[self.neighbour].data.transfer(stream, [], False, self.sender, watermark=(path, value))


class InProcessPeer:
    def __init__(self, peer: str, network: FakeNetwork, retention: int = 100_000) -> None:
        self.id = peer
        self.state = PeerState(peer, network.backbone)
        self.executor = make_executor("inline", peer)
        self.link = FakeLink(peer, network)
        self.senders: dict[str, DirectSender] = {}
        self.data = DataPlane(self.state, self.executor, self.sender)
        history = Retention(self.state)
        self.participant = Participant(self.state, self.executor, self.link, self.data.attach,
                                       background=False,
                                       replay=log_replayer(history, self.data.replay),
                                       positions=self.data.positions,
                                       replays=ReplayHolds(history, self.data.replays))
        self.control = ControlPlane(self.state, self.link, retention)
        self.control.positions = self.data.positions
        self.local = LocalPeer(self.participant, self.control)

    def sender(self, neighbour: str) -> DirectSender:
        s = self.senders.get(neighbour)
        if s is None:
            s = self.senders[neighbour] = DirectSender(self.network, neighbour, self.id)
        return s

    @property
    def network(self) -> FakeNetwork:
        return self.link.network

    def stop(self) -> None:
        self.control.stop()


def in_process_network(backbone: Backbone | None = None) -> FakeNetwork:
    network = FakeNetwork(backbone or paper_example_backbone())
    for peer in network.backbone.peers:
        network.peers[peer] = InProcessPeer(peer, network)
    return network


def photon_network(warmup: list[str]) -> Iterator[FakeNetwork]:
    """An in-process network with "photons" registered at SP4 and ``warmup`` published
    (statistics before any subscription); stopped when the caller's fixture ends."""
    net = in_process_network()
    net.peers["SP4"].control.register_stream("photons", "photons", "photon", rate=100)
    net.peers["SP4"].data.publish("photons", warmup)
    yield net
    for p in net.peers.values():
        p.stop()


def buffered_results(record, timeout: float = 10.0) -> list[str]:
    """A subscription's results from its buffer, until it ends; fails if none come in time."""
    out: list[str] = []
    while True:
        _, items, closed, _ = record.runtime.buffer.read(len(out), 10_000, timeout)
        out.extend(items)
        if closed:
            return out
        assert items, "no results within the timeout"
