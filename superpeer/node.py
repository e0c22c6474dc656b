"""One super-peer: the composition root that builds its parts, and the façade its services call.

``Node`` is the one place where the parts of a super-peer are made, each from explicit
constructor arguments, in the order they depend on each other:

* ``peer_state.PeerState``: the stream property table (``sharing.stream_table``, shared with
  the simulator), the streams registered here, the transactions in flight
  (``control.transactions``) — over the ``history.state_store.StateStore``;
* the transport to the other super-peers: ``rpc.peer_channels.GrpcPeerChannels`` (gRPC calls,
  forwarders, heartbeats), or the in-process one of the tests — the only part a test swaps;
* the executor (``executors``), the history (``history``: retention, replays of the log, the
  archive, pins), the data plane (``data.data_plane``), the participant and the control plane
  (``control``), re-planning and heartbeats (``recovery``).

Constructors only store what they are given; ``start`` takes back what a restarted peer had
(``recovery.restore``) and starts the long-lived parts in order (``lifecycle.Parts``), ``stop``
stops them in reverse order. Two references close the loops of a super-peer's parts: the
executor's outputs and a call of this peer to itself both come back through this node.

As a façade, every public method raises ``NodeError`` with a gRPC status name and a message a
person can act on; nothing a thin peer or a neighbour sends can crash the daemon. Who may call
what is decided in ``security``; this node only asks.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sharing.properties import InputStream
from sharing.stream_table import NetworkStream

from wxquery.operators.count_alignment import Anchor

from .control.adaptive_sampling import AdaptiveSampling
from .control.announcements import waited_for
from .control.control_plane import ControlPlane
from .control.count_handover import align_here, anchor_here
from .control.lowering_claims import Grant, LoweringClaims
from .control.reoptimisation import Reoptimiser
from .control.reoptimisation_settings import ReoptimisationSettings
from .data.origins import Origins
from .control.participant import Participant
from .control.widening_in_place import InPlaceWidening
from .control.peer_link import Aligned, PeerLink, Reserved, Waiting
from .data.backpressure import HELD_BACK, Backpressure, LinkBuffer, LinkRoom, downstream
from .data.data_plane import DataPlane, Outbound, Published
from .data.network_joins import NetworkJoins, made_by_reader
from .data.limits import DataLimits
from .data.positions import StreamPositions
from .data.stream_rates import ExecutorLoad, LinkRates
from .errors import NodeError
from .executors import Executor, make_executor
from .history.archive.writer import ArchiveSettings, Archiver
from .history.bounds import HistoryBound, parse_history
from .history.history_source import HistorySource
from .history.log_replay import LogReplays
from .history.pins import HistoryPins
from .history.retention import Retention
from .history.state_store import StateStore
from .lifecycle import Lifecycle, Parts
from .metrics import Metrics
from .peer_state import PeerState
from .recovery.failure_detector import HeartbeatSettings
from .recovery.membership import Answer, Gossip
from .recovery.heartbeats import Heartbeats, HeartbeatTransport
from .recovery.replanning import Recovery
from .recovery.restore import restore_originals, restore_subscriptions
from .rpc.peer_channels import GrpcPeerChannels
from .security import peer_access
from .security.tls import Security
from .status import report
from .subscriptions.record import SubscriptionRecord
from .subscriptions.results import ResultBuffer
from .topology import Topology

__all__ = ["Node", "NodeError", "NodeSettings", "SubscriptionRecord", "Transport"]

log = logging.getLogger("streamglobe.superpeer")


class Transport(PeerLink, Outbound, HeartbeatTransport, Lifecycle, Protocol):
    """How a super-peer reaches the others: control calls (a call to itself included), the
    outbound queues of items, the heartbeats; and its account for ``status``."""

    def status(self) -> dict: ...

    def cut_link(self, peer: str, cut: bool) -> list[str]:
        """Fault injection: cut (or restore) the link to a neighbour; the links cut now."""
        ...


@dataclass(frozen=True)
class NodeSettings:
    """Everything a super-peer is configured with (``superpeer serve``'s flags)."""

    retention: int = 500_000  # result items a subscription's buffer keeps
    executor: str = "inline"
    executor_options: dict = field(default_factory=dict)  # ``executors.make_executor``
    limits: DataLimits = field(default_factory=DataLimits)
    heartbeats: HeartbeatSettings = field(default_factory=HeartbeatSettings)
    state_dir: str | Path | None = None  # what survives a restart; None: in memory
    watermark_idle_s: float = 2.0  # a stream with an event time idle this long gets watermarks
    history: HistoryBound | None = None  # what a stream registered without a bound keeps
    archive: ArchiveSettings | None = None  # persist the streams registered here as Parquet
    replay_rate: float = 0.0  # items/s a replay of the past sends at most (0: as the links take)
    cut_routes_in_background: bool = True  # False: routes are cut before ``remove`` returns
    cut_links: tuple[str, ...] = ()  # neighbours the links to are cut from the start (``rpc.link_cut``)
    reoptimisation: ReoptimisationSettings = field(default_factory=ReoptimisationSettings)
    widening: bool = True  # widen a running stream for a near miss, in place (``sharing.widening``)
    network_joins: bool = True  # run joins placed in the network here (``data.network_joins``)
    metrics_port: int | None = None  # serve Prometheus metrics on this port (0: any free one)
    metrics_host: str = "127.0.0.1"  # the metrics server's address (0.0.0.0 in a container)


class Node:
    def __init__(self, peer: str, topology: Topology, settings: NodeSettings | None = None,
                 security: Security | None = None, transport: Transport | None = None) -> None:
        """``transport``: to the other super-peers (default: gRPC, with ``security``'s mutual TLS)."""
        settings = settings or NodeSettings()
        if peer not in topology.backbone.peers:
            raise NodeError("INVALID_ARGUMENT", f"{peer} is not a super-peer of the topology")
        self.id, self.topology, self.settings = peer, topology, settings
        try:  # (its outputs reach the data plane, built below, through this node)
            self.executor: Executor = make_executor(settings.executor, peer, deliver=self._executor_output,
                                                    passed=self._executor_watermark, **settings.executor_options)
        except ValueError as exc:
            raise NodeError("UNIMPLEMENTED", str(exc)) from None
        try:
            store = StateStore(settings.state_dir)
        except (OSError, sqlite3.Error) as exc:
            raise NodeError("FAILED_PRECONDITION", f"cannot use the state directory {settings.state_dir}: "
                                                   f"{exc}") from None
        self.state = PeerState(peer, topology.backbone, settings.limits, store)
        self.transport: Transport = transport or GrpcPeerChannels(
            peer, topology, local=self, heartbeats=settings.heartbeats, security=security, cut=settings.cut_links)
        archive = settings.archive
        past = HistorySource(store, archive.directory if archive is not None else None)
        self.retention = Retention(self.state, settings.history, past)
        self.positions = StreamPositions()
        self.replays = LogReplays(self.state, self.positions, past, self.retention, self.state.transactions,
                                  settings.replay_rate)
        self.metrics = Metrics(peer, self.status, settings.metrics_port, settings.metrics_host)
        self.data = DataPlane(self.state, self.executor, self.transport, self.positions, self.replays,
                              observe_batch=self.metrics.executor_batch.observe)
        self.link_buffer = LinkBuffer(settings.limits.link_buffer_bytes, settings.limits.link_buffer_items)
        self.pressure = Backpressure(self._rooms_of)
        self.link_rates = LinkRates()  # (admission holds a link to what it measurably carries)
        self.executor_load = ExecutorLoad()  # (… and a peer to what its executor measurably spends)
        self.archiver = (Archiver(self.state, archive.directory, archive.span, archive.samples)
                         if archive is not None else None)
        self.widening = InPlaceWidening(self.state, self.executor)  # (streams widened in place: their steps here)
        # (joins placed in the network run here, beside either executor: ``network_joins``)
        self.joins = NetworkJoins(self.state, self.data.ingest) if settings.network_joins else None
        self.state.runs_joins = self.joins is not None
        self.participant = Participant(self.state, self.executor, self.transport, self.positions, self.replays,
                                       attach=self.data.attach, replay=self.data.replay, removed=self._forget,
                                       background=settings.cut_routes_in_background, widening=self.widening,
                                       joins=self.joins)
        self.control = ControlPlane(self.state, self.transport, settings.retention, self.positions,
                                    self.transport.detector.incarnation)
        self.control.subnets = topology.subnets
        self.recovery = Recovery(self.control, self.transport.detector)
        # (in place where the executor can put a residual in front of the stream's readers: the
        # inline one; a stream widened in place needs nobody to move)
        self.control.widening = self.control.widen_in_place = settings.widening and hasattr(self.executor, "narrow")
        self._drift_woken = 0.0
        self.reoptimiser = Reoptimiser(self.control, self.recovery, settings.reoptimisation,
                                       synchronous=self.executor.synchronous)
        self.lowering = LoweringClaims(self.state.id)  # (the links sent on from here: who lowers first)
        self.adaptive = AdaptiveSampling(self.reoptimiser)
        self.reoptimiser.adapt = self.adaptive.round
        self.control.replanned = self.reoptimiser.wake  # (events that can change the best plans)
        self.recovery.replanned = self.reoptimiser.wake
        self.recovery.moving = lambda sid: sid in self.reoptimiser.switches
        self.pins = HistoryPins(self.state, self.control.subscriptions, self.retention, self.replays, self.archiver)
        self.heartbeats = Heartbeats(self.state, self.transport, [
            ("re-planning", self.recovery.after_heartbeat),
            ("idle watermarks", lambda: self.data.idle_watermarks(settings.watermark_idle_s)),
            ("trimming the history", self.pins.trim),
            ("late activations", self.control.activate_late),
            ("measured rates", self._measure),
        ], own_pins=self.pins.own, waited_for=lambda: waited_for(self.state, self.control.subscriptions))
        self.control.waiters, self.control.waiting_changed = self.heartbeats.waiters, self.heartbeats.changed
        self.parts = Parts([  # (the transport before, and stopped after, every part that sends through it)
            ("subscriptions", self.control), ("transport", self.transport), ("executor", self.executor),
            ("replays", self.replays), *([("archive", self.archiver)] if self.archiver is not None else []),
            ("recovery", self.recovery), ("re-optimisation", self.reoptimiser), ("heartbeats", self.heartbeats),
            ("metrics", self.metrics)])

    def _measure(self) -> None:
        """Each stream's measured rate (``data.stream_rates``); a drift is an event for
        re-optimisation."""
        counters = dict(getattr(self.transport, "link_counters", {}))
        measured = self.link_rates.measure(counters)
        bound = self.link_buffer  # (a link holding half its bound or more is held back: under pressure)
        pressed = sorted(peer for peer, c in counters.items()
                         if c.held_bytes >= bound.max_bytes / 2 or c.held_items >= bound.max_items / 2)
        scale = 1.0 if self.executor.synchronous else self.state.backbone.capacity().get(self.id, 1.0)
        load = self.executor_load.measure(self.executor.busy_s, scale)
        with self.state.lock:
            drifted = self.data.rates.measure(self.state.table)
            self.state.measured_links, self.state.measured_load = measured, load
            self.state.pressured_links = pressed
        now = time.monotonic()
        if drifted and now - self._drift_woken >= self.settings.reoptimisation.every_s:
            self._drift_woken = now  # (a round at most every interval for drifts)
            self.reoptimiser.wake(f"measured rates of {', '.join(sorted(drifted)[:3])} drifted", changes=False)

    def _executor_output(self, stream: str, seq: int, outputs: list, end: bool,
                         origins: Origins | None = None) -> None:
        self.data.executor_output(stream, seq, outputs, end, origins)

    def _executor_watermark(self, stream: str, path: str, value: float) -> None:
        with self.state.lock:  # (Spark has handed on the stream's items before it: ``Passed``)
            self.data.pass_watermark(stream, path, value)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Take back what this peer had (its ``--state-dir``), then start every part."""
        streams = restore_originals(self.state)
        subscriptions = restore_subscriptions(self.control, self.recovery)
        if streams or subscriptions:
            log.warning("%s restored %d streams and %d subscriptions from %s", self.id, streams,
                        subscriptions, self.state.store.path)
        self.parts.start()

    def stop(self) -> None:
        self.parts.stop()

    # ------------------------------------------------------------------ thin peers

    def register_stream(self, name: str, root: str, item: str, rate: float, event_time: str = "",
                        event_time_rate: float = 1.0, publisher: str = "", history: str = "") -> str:
        """Returns the history bound the stream is kept with (``retention``)."""
        try:
            parse_history(history)
        except ValueError as exc:
            raise NodeError("INVALID_ARGUMENT", str(exc)) from None
        self.control.register_stream(name, root, item, rate, event_time, event_time_rate, publisher)
        with self.state.lock:
            return self.retention.set_bound(name, history)

    def publish(self, name: str, items: list[str] | list[bytes], first: int | None = None,
                position: int | None = None, until: float | None = None) -> Published:
        """``until`` (monotonic): how long the batch may wait for room on the links it will
        leave on (back-pressure); past it, nothing of it is taken and the publisher is told to
        send it again (``HELD_BACK``)."""
        waited = self.pressure.wait(name, until)
        if not waited.room:
            raise NodeError("RESOURCE_EXHAUSTED", HELD_BACK + waited.reason)
        done = self.data.publish(name, items, first, position)
        return done._replace(held_back_s=waited.seconds, held_back=waited.reason)

    def room_for(self, stream: str, until: float | None) -> str:
        """Wait until the links a batch of ``stream`` leaves on have room (""), or say why not
        by ``until`` (a neighbour's batch waits so, before it is taken and acknowledged)."""
        waited = self.pressure.wait(stream, until)
        return "" if waited.room else waited.reason

    def _forget(self, stream: str) -> None:
        """A stream removed here (under the lock): what the data plane and back-pressure kept of it."""
        self.data.forget(stream)
        self.pressure.forget(stream)
        if self.joins is not None:
            self.joins.remove(stream)

    def _rooms_of(self, stream: str) -> list:
        """Where a batch of ``stream`` goes next from here (``backpressure``): the outbound
        links it and the streams made here from it leave on, and the executor if it computes
        one of them and keeps a backlog."""
        with self.state.lock:
            hops, computed = downstream(self.state.table, self.state.id, self.state.derived_here,
                                        lambda c: self.executor.is_copy(c) or made_by_reader(self.state.table, c),
                                        stream)
        forwarder = getattr(self.transport, "forwarder", None)
        rooms: list = [LinkRoom(f, self.link_buffer) for f in (forwarder(n) for n in sorted(hops))
                       if forwarder is not None and hasattr(f, "wait_for_room")]
        room = getattr(self.executor, "room", None)
        if computed and room is not None:
            rooms.append(room())
        return rooms

    def close_stream(self, name: str) -> int:
        return self.data.close_stream(name)

    def subscribe(self, query: str, strategy: str = "sharing",
                  wait_for_streams: bool = False, **request) -> SubscriptionRecord:
        with self.metrics.registration.time():
            record = self.control.subscribe(query, strategy, wait_for_streams, **request)
        self.metrics.registration_steps(record.registration_ms)
        return record

    def unsubscribe(self, sid: str) -> list[str]:
        return self.control.unsubscribe(sid)

    def read_results(self, sid: str, offset: int, max_items: int, wait_s: float, peek: bool = False
                     ) -> tuple[ResultBuffer, tuple[int, list[str], bool, int]]:
        return self.control.read_results(sid, offset, max_items, wait_s, peek)

    def cut_link(self, peer: str, cut: bool) -> list[str]:
        """``network cut``: nothing passes between this peer and ``peer`` until it is restored."""
        return self.transport.cut_link(peer, cut)

    def status(self) -> dict:
        return {**report(self.state, self.topology, self.executor, self.control, self.data, self.retention,
                         self.transport, self.archiver),
                "reoptimisation": {**self.reoptimiser.status(), "adaptive_sampling": {
                    **self.adaptive.status(), "lowering_claims": self._claims_status()}},
                "backpressure": self.pressure.status(), "membership": self.heartbeats.status(),
                "network_joins": self.joins.status() if self.joins is not None else None}

    # ------------------------------------------------------------------ super-peers (``PeerHandler``)
    # ``caller``: the calling super-peer's certified id; None on an insecure network, and when
    # this peer calls itself.

    def lookup(self, input_stream: InputStream) -> tuple[list[NetworkStream], dict]:
        return self.participant.lookup(input_stream)

    def statistics(self, name: str, sample_of: int = 0) -> dict:
        return self.participant.statistics(name, sample_of)

    def announce(self, stream: NetworkStream, caller: str | None = None) -> list[Waiting]:
        peer_access.check_announce(caller, stream, self.state.backbone.peers)
        return self.control.announce(stream)

    def activate(self, sid: str) -> tuple[bool, str]:
        return self.control.activate(sid)

    def find_stream(self, name: str) -> NetworkStream | None:
        with self.state.lock:
            return self.state.known_originals.get(name)

    def reserve(self, txn: str, streams: list[NetworkStream], subscription: str, target: str,
                version: int | None = None, attach: dict | None = None, caller: str | None = None,
                pins: list[str] | None = None) -> Reserved:
        peer_access.check_reserve(caller, streams, subscription, target, attach or {})
        return self.participant.reserve_with_replays(txn, streams, subscription, target, version, attach,
                                                     coordinator=caller, pins=pins)

    def commit(self, txn: str, subscription: str, lineage: list[str], replay: dict[str, int] | None = None,
               since: dict[str, float] | None = None, held: list[str] | None = None,
               caller: str | None = None) -> dict[str, dict]:
        """Where the plan starts in the streams registered here (``Participant.commit``). Only
        the peer that planned a subscription commits it; a lease that expired is refused."""
        peer_access.check_transaction(caller, txn, self.state.transactions.get(txn), subscription, "Commit")
        return self.participant.commit(txn, subscription, lineage, replay, since, held)

    def count_anchor(self, stream: str, caller: str | None = None) -> tuple[Anchor | None, str]:
        return anchor_here(self.state, self.executor, stream)

    def align_count(self, stream: str, anchor: Anchor, caller: str | None = None) -> Aligned:
        peer_access.check_align(caller, stream)
        return align_here(self.state, self.executor, stream, anchor)

    def _claims_status(self) -> dict:
        with self.state.lock:  # (claims come in on the gRPC threads)
            return self.lowering.status()

    def claim_lowering(self, neighbour: str, subscription: str, priority: float,
                       caller: str | None = None) -> Grant:
        """May ``subscription`` lower its sample for the link from here to ``neighbour``?"""
        peer_access.check_claim(caller, subscription)
        if neighbour not in self.state.backbone.graph[self.state.id]:
            raise NodeError("INVALID_ARGUMENT", f"{self.state.id} has no link to {neighbour!r}")
        try:
            with self.state.lock:
                return self.lowering.claim(neighbour, subscription, priority)
        except ValueError as exc:
            raise NodeError("INVALID_ARGUMENT", str(exc)) from None

    def widen_stream(self, txn: str, step: str, wide: NetworkStream, was: NetworkStream,
                     caller: str | None = None) -> None:
        """One step of widening a stream of this peer's route in place (``widening_in_place``)."""
        try:
            self.widening.step(txn, step, wide, was)
        except (ValueError, KeyError) as exc:  # (a residual or chain that cannot be narrowed: refused)
            raise NodeError("FAILED_PRECONDITION", f"{wide.id} cannot be widened at {self.state.id}: {exc}") from None

    def abort(self, txn: str, caller: str | None = None) -> bool:
        """Whether a replay ``txn`` held here had been let go before (``Participant.abort``)."""
        holder = self.state.transactions.known(txn)
        peer_access.check_transaction(caller, txn, holder, holder.subscription if holder else f"{caller}-", "Abort")
        return self.participant.abort(txn)

    def remove(self, sid: str, caller: str | None = None) -> list[str]:
        peer_access.check_remove(caller, sid)
        return self.participant.remove(sid)

    def truncate(self, stream: str, last: str, caller: str | None = None) -> None:
        entry = self.state.table.get(stream)
        peer_access.check_truncate(caller, stream, entry.route if entry is not None else None, last)
        self.participant.truncate(stream, last)

    def transfer(self, stream: str, items: list[str], end: bool, sender: str = "", epoch: str = "",
                 first: int | None = None, watermark: tuple[str, float] | None = None,
                 caller: str | None = None, origins: Origins | None = None) -> int:
        peer_access.check_transfer_sender(caller, sender, stream)
        return self.data.transfer(stream, items, end, sender, epoch, first, watermark, origins)

    # ------------------------------------------------------------------ heartbeats

    def heartbeat_once(self) -> None:
        """One heartbeat round now (``recovery.heartbeats``), as the heartbeat thread does each interval."""
        self.heartbeats.once()

    def heartbeat_reply(self, request: Gossip) -> Answer:
        return self.heartbeats.reply(request)

    @property
    def epoch(self) -> str:
        """This process's incarnation, as the other super-peers hear it."""
        return self.transport.epoch
