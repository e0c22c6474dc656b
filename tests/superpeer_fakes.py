"""Super-peers in one process, without gRPC: every peer is a real ``Node`` — built by the
daemon's own composition root with only the transport swapped — joined by a fake of the network
transport (``PeerLink``, the forwarders' ``Sender``, heartbeats) that calls the other peer's node
directly, copies streams as the wire would, records every call (to the calling peer itself too),
can make a peer unreachable or refuse reservations, and can run a test's action just before any
call (to place a close or a failure at an exact point). No heartbeat round runs unless a test
calls ``heartbeat_once``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sharing.backbone import Backbone
from sharing.properties import InputStream
from sharing.scenarios import paper_example_backbone
from sharing.stream_table import NetworkStream
from sharing.subnets import Subnets
from wxquery.operators.count_alignment import Anchor
from superpeer.control.peer_link import STATISTICS, Aligned, Committed, Reserved, Waiting, copy_stream
from superpeer.errors import NodeError
from superpeer.control.reoptimisation_settings import ReoptimisationSettings
from superpeer.node import Node, NodeSettings
from superpeer.recovery.failure_detector import FailureDetector, HeartbeatSettings
from superpeer.topology import Topology

NO_ROUNDS = HeartbeatSettings(interval_s=24 * 3600.0)  # heartbeat rounds only when a test asks


@dataclass
class Call:
    sender: str
    method: str
    peer: str
    args: tuple


@dataclass
class FakeNetwork:
    backbone: Backbone
    peers: dict[str, Node] = field(default_factory=dict)
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


class FakeTransport:
    """The ``Transport`` of one peer over a ``FakeNetwork``."""

    def __init__(self, sender: str, network: FakeNetwork) -> None:
        self.sender = sender
        self.network = network
        self.senders: dict[str, DirectSender] = {}
        self.detector = FailureDetector(sender, frozenset(network.backbone.graph.neighbors(sender)), NO_ROUNDS)
        self.epoch = f"in-process-{sender}"

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def forwarder(self, neighbour: str) -> "DirectSender":
        s = self.senders.get(neighbour)
        if s is None:
            s = self.senders[neighbour] = DirectSender(self.network, neighbour, self.sender)
        return s

    def discard(self, stream: str) -> None:
        pass  # (a direct sender queues nothing)

    def heartbeat_round(self, requests: dict) -> dict:
        return {}

    def gossip(self, requests: dict, answered) -> None:
        pass

    def relay_probe(self, relays, target: str) -> bool:
        return False

    def probe(self, target: str) -> bool:
        return target not in self.network.down

    def cut_link(self, peer: str, cut: bool) -> list[str]:
        raise NodeError("UNIMPLEMENTED", "the in-process transport cannot cut a link: use network.down")

    def status(self) -> dict:
        return {"links": {}, "unreachable_peers": {}, "peers_last_heard_s_ago": {}, "failure_detector": {}}

    def _handler(self, method: str, peer: str, *args) -> Node | None:
        if self.network.forbidden:
            raise AssertionError(f"{method} to {peer} while {self.network.forbidden}")
        call = Call(self.sender, method, peer, args)
        self.network.calls.append(call)
        self.network.hook(call)
        if peer in self.network.down and peer != self.sender:
            return None
        return self.network.peers[peer]

    def lookup(self, peer: str, input_stream: InputStream,
               statistics_of: int | None = None) -> tuple[list[NetworkStream], dict] | None:
        h = self._handler("lookup", peer, input_stream, statistics_of)
        if h is None:
            return None
        streams, usage = h.lookup(input_stream)
        if statistics_of is not None and peer != self.sender:  # (as the gRPC service answers)
            try:
                usage[STATISTICS] = h.statistics(input_stream.stream, statistics_of)
            except NodeError:
                pass
        return [copy_stream(s) for s in streams], usage

    def statistics(self, peer: str, name: str, sample_of: int = 0) -> dict:
        h = self._handler("statistics", peer, name, sample_of)
        if h is None:
            raise NodeError("UNAVAILABLE", f"super-peer {peer} is unreachable")
        return h.statistics(name, sample_of)

    def announce(self, peer: str, stream: NetworkStream) -> list[Waiting] | None:
        h = self._handler("announce", peer, stream.id)
        return None if h is None else h.announce(copy_stream(stream))

    def find_stream(self, peer: str, name: str) -> NetworkStream | None:
        h = self._handler("find_stream", peer, name)
        found = None if h is None else h.find_stream(name)
        return None if found is None else copy_stream(found)

    def activate(self, peer: str, subscription: str) -> None:
        h = self._handler("activate", peer, subscription)
        if h is not None:
            h.activate(subscription)

    def reserve(self, peer: str, txn: str, streams: list[NetworkStream], subscription: str,
                target: str, version: int | None = None, attach: dict | None = None,
                pins: list[str] | None = None) -> Reserved:
        h = self._handler("reserve", peer, txn)
        if h is None:
            return Reserved(False, f"{peer} is unreachable")
        n = self.network.reserves[peer] = self.network.reserves.get(peer, 0) + 1
        reason = self.network.refuse(peer, n)
        if reason:
            return Reserved(False, reason)
        return h.reserve(txn, [copy_stream(s) for s in streams], subscription, target, version, attach,
                         pins=pins)

    def commit(self, peer: str, txn: str, subscription: str, lineage: list[str],
               required: bool, replay: dict[str, int] | None = None,
               since: dict[str, float] | None = None, held: list[str] | None = None) -> Committed:
        h = self._handler("commit", peer, txn, subscription)
        if h is None:
            if required:
                raise NodeError("UNAVAILABLE", f"super-peer {peer} is unreachable")
            return Committed({})
        return Committed.of(h.commit(txn, subscription, lineage, replay, since, held))

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

    def count_anchor(self, peer: str, stream: str) -> tuple[Anchor | None, str]:
        h = self._handler("count_anchor", peer, stream)
        return (None, f"{peer} did not answer") if h is None else h.count_anchor(stream)

    def align_count(self, peer: str, stream: str, anchor: Anchor) -> Aligned | None:
        h = self._handler("align_count", peer, stream, anchor)
        return None if h is None else h.align_count(stream, anchor)

    def claim_lowering(self, peer: str, neighbour: str, subscription: str, priority: float):
        h = self._handler("claim_lowering", peer, neighbour, subscription)
        return None if h is None else h.claim_lowering(neighbour, subscription, priority)

    def widen_stream(self, peer: str, txn: str, step: str, wide, was) -> None:
        h = self._handler("widen_stream", peer, txn, step)
        if h is None:
            raise NodeError("UNAVAILABLE", f"super-peer {peer} is unreachable")
        h.widen_stream(txn, step, copy_stream(wide), copy_stream(was))


class DirectSender:
    """A forwarder that hands the batch to the neighbour's data plane at once (in order)."""

    def __init__(self, network: FakeNetwork, neighbour: str, sender: str = "") -> None:
        self.network = network
        self.neighbour = neighbour
        self.sender = sender
        self.items = 0

    def send(self, stream: str, items: list[str], end: bool = False, position: int | None = None,
             origins=None) -> None:
        self.items += len(items)
        self.network.peers[self.neighbour].data.transfer(stream, list(items), end, self.sender, first=position,
                                                         origins=origins)

    def send_watermark(self, stream: str, path: str, value: float) -> None:
        self.network.peers[self.neighbour].data.transfer(stream, [], False, self.sender, watermark=(path, value))


def in_process_peer(peer: str, network: FakeNetwork, retention: int = 100_000,
                    subnets: Subnets | None = None, executor: str = "inline",
                    executor_options: dict | None = None) -> Node:
    """A peer as the daemon builds it, on the fake transport, started; routes are cut before a
    removal returns, and subscriptions are re-optimised only when a test runs a round
    (``node.reoptimiser.round``): deterministic tests. ``executor``: ``inline`` or ``spark``
    (real Spark in this process, ``executor_options`` as ``make_executor`` takes them)."""
    addresses = {p: f"in-process:{p}" for p in network.backbone.peers}  # (no socket: for status only)
    node = Node(peer, Topology(network.backbone, addresses, subnets=subnets),
                NodeSettings(retention=retention, cut_routes_in_background=False, widening=False,
                             executor=executor, executor_options=executor_options or {},
                             reoptimisation=ReoptimisationSettings(enabled=False, adaptive=False)),
                transport=FakeTransport(peer, network))
    node.state.staying = frozenset()  # (its subscriptions move when a test runs a round: it says so)
    node.start()
    return node


def in_process_network(backbone: Backbone | None = None, subnets: list[dict] | None = None,
                       spark: dict[str, dict] | None = None) -> FakeNetwork:
    """``subnets``: as a topology file's ``[[subnet]]`` tables; ``spark``: the peers that run
    the Spark executor, each with its options (the others run the inline one)."""
    network = FakeNetwork(backbone or paper_example_backbone())
    declared = Subnets.from_mapping(network.backbone, subnets) if subnets else None
    for peer in network.backbone.peers:
        on_spark = (spark or {}).get(peer)
        network.peers[peer] = in_process_peer(peer, network, subnets=declared,
                                              executor="spark" if on_spark is not None else "inline",
                                              executor_options=on_spark)
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


def publish_switching(source: Node, mover: Node, items: list[str], batch: int, stream: str = "photons") -> None:
    """``items`` published at ``source`` in batches; after each, the switches ``mover``'s
    re-optimiser has under way are finished (moves run by the test, as its loop would)."""
    for k in range(0, len(items), batch):
        source.data.publish(stream, items[k:k + batch])
        mover.reoptimiser.finish_switches()


def buffered_results(record, timeout: float = 10.0) -> list[str]:
    """A subscription's results from its buffer, until it ends; fails if none come in time."""
    out: list[str] = []
    while True:
        _, items, closed, _ = record.runtime.buffer.read(len(out), 10_000, timeout)
        out.extend(items)
        if closed:
            return out
        assert items, "no results within the timeout"


def subscribed_at_once_and_exact(items: list[str], queries: list[tuple[str, str]],
                                 check: Callable[[list], None] = lambda records: None) -> None:
    """``photons`` registered at SP4 with a tenth of ``items`` published (their statistics
    price the plans), then each (peer, query) subscribed in turn, ``check`` given their records
    (the plans), the rest of ``items`` published and the stream closed: every subscriber has
    the reference evaluator's results over what was published after it subscribed."""
    from network_harness import reference_results, same

    warm = len(items) // 10
    net = in_process_network()
    try:
        sp4 = net.peers["SP4"]
        sp4.control.register_stream("photons", "photons", "photon", rate=10)
        sp4.data.publish("photons", items[:warm])
        records = [net.peers[peer].control.subscribe(query) for peer, query in queries]
        check(records)
        sp4.data.publish("photons", items[warm:])
        sp4.data.close_stream("photons")
        for record, (_, query) in zip(records, queries):
            expected = reference_results(query, items[warm:])
            assert len(expected) > 5, query
            assert same(buffered_results(record), expected), (query, record.plan.describe())
    finally:
        for p in net.peers.values():
            p.stop()
