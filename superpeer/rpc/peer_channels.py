"""Calls from one super-peer to the others over gRPC: the network boundary of the control plane.

``GrpcPeerChannels`` implements ``control.peer_link.PeerLink``, the interface the control plane
and the planning-view fetch use to talk to a peer, in the optimizer's own types (streams,
statistics), one method per super-peer RPC. A call to this peer itself goes to its own handler
(the ``Node``) without the network. It is the production implementation: one channel per neighbour, JSON inside protobuf messages
(``sharing.serialization``), failures recorded per peer for ``status`` and turned into
``NodeError("UNAVAILABLE")`` where the caller cannot go on without the answer. Unit tests of
the control plane replace it with an in-process fake of the same interface.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import grpc

from proto import streamglobe_pb2 as pb
from proto import streamglobe_pb2_grpc as pb_grpc
from sharing.properties import InputStream
from sharing.serialization import stream_from_json, stream_to_json
from sharing.stream_table import NetworkStream
from wxquery.operators.count_alignment import Anchor

from ..control.lowering_claims import Grant
from ..control.peer_link import (
    Aligned,
    Committed,
    PeerHandler,
    Reserved,
    Waiting,
    copy_stream,
    with_statistics,
)
from ..data.forwarding import Forwarder, LinkCounters
from ..errors import NodeError
from ..recovery.failure_detector import FailureDetector, HeartbeatSettings
from ..recovery.membership import Answer, Gossip, Silence
from ..security.tls import Security, channel_options
from ..topology import Topology
from .link_cut import CutLink
from .stream_wire import StaticParses
from .wire import commit_to_wire, input_to_wire, part_to_wire, waiting_from_wire, widening_to_wire

T = TypeVar("T")
log = logging.getLogger("streamglobe.superpeer")
CALL_TIMEOUT_S = 10
HEARTBEAT_TIMEOUT_S = 1.0
CLAIM_TIMEOUT_S = 2.0  # ``claim_lowering``: a sender that does not answer in time is not waited for
SILENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})  # (else it answered)
# A peer dialled before it listened (a network starting up) leaves its channel in gRPC's
# reconnect backoff (1 s, growing), and calls in between fail at once. Until the peer has
# answered once, and for this long after it was first dialled, a call found unreachable is
# tried again, waiting for the channel to connect (at most ``FIRST_CONTACT_WAIT_S``).
FIRST_CONTACT_S = 15.0
FIRST_CONTACT_WAIT_S = 3.0
# a peer's answers that refuse a call (a required call raises them as they are, not as unreachable)
REFUSALS = frozenset({grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT,
                      grpc.StatusCode.NOT_FOUND, grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.ABORTED,
                      grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.PERMISSION_DENIED,
                      grpc.StatusCode.UNAUTHENTICATED})


class _Stopped(Exception):
    """An RPC was attempted while this node is stopping."""


class GrpcPeerChannels:
    """``PeerLink`` over gRPC, plus the outbound forwarders and the heartbeats."""

    def __init__(self, peer: str, topology: Topology, local: PeerHandler,
                 heartbeats: HeartbeatSettings | None = None, security: Security | None = None,
                 cut: tuple[str, ...] = ()) -> None:
        """``local``: this peer's own handler (its ``Node``), for calls to itself; ``cut``: the
        neighbours the links to are cut from the start (``cut_link``)."""
        self.id = peer
        self.topology = topology
        self.security = security  # mutual TLS to the other super-peers' peer addresses
        self.local = local
        self.unreachable: dict[str, str] = {}  # the last failed call per peer, for errors
        self.detector = FailureDetector(peer, frozenset(topology.backbone.graph.neighbors(peer)),
                                        heartbeats or HeartbeatSettings())
        self.link_counters: dict[str, LinkCounters] = {}
        self.forwarders: dict[str, Forwarder] = {}
        self.epoch = secrets.token_hex(8)  # this process's numbering of items on its links
        self._channels: dict[tuple[str, bool], grpc.Channel] = {}  # (peer, for items)
        self._stubs: dict[tuple[str, bool], pb_grpc.SuperPeerStub] = {}  # (one per channel: a stub binds every method)
        self._making = threading.Lock()
        self._dialled: dict[str, float] = {}  # peer -> when a channel to it was first made
        self._answered: set[str] = set()  # peers that answered a call or a heartbeat once
        self.parses = StaticParses()  # (lookup answers: each stream's fixed part read once)
        self._stop = threading.Event()
        self.cut: set[str] = set()  # neighbours the link to is cut on purpose (``link_cut``)
        for neighbour in cut:
            self.cut_link(neighbour, True)

    # ------------------------------------------------------------------ plumbing

    def stub(self, peer: str, data: bool = False) -> pb_grpc.SuperPeerStub:
        """The stub of the channel to ``peer``: heartbeats and the control plane's calls on one,
        the items (``data``: the forwarders' streams of batches) on another, each its own TCP
        connection. Sharing one connection, a heartbeat waited behind megabytes of items in the
        socket's buffer on a slow, saturated link, and the peer was declared down for it."""
        key = (peer, data)
        stub = self._stubs.get(key)
        if stub is not None:
            return stub
        with self._making:  # (two first calls at once: one channel, not one left open beside it)
            return self._stubs.get(key) or self._make_stub(peer, data)

    def _make_stub(self, peer: str, data: bool) -> pb_grpc.SuperPeerStub:
        key = (peer, data)
        ch = self._channels.get(key)
        if ch is None:
            options = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]
            if data:  # (channels with the same target and options would share one connection)
                options.append(("grpc.use_local_subchannel_pool", 1))
            else:  # a peer starting up is dialled again within 2 s, not gRPC's growing 1 s … 2 min
                options += [("grpc.initial_reconnect_backoff_ms", 500), ("grpc.max_reconnect_backoff_ms", 2000)]
            address = self.topology.peer_address(peer)
            if self.security is None:
                ch = grpc.insecure_channel(address, options=options)
            else:  # its certificate must name the peer meant, whatever address it answers at
                ch = grpc.secure_channel(address, self.security.channel_credentials(),
                                         options=options + channel_options(peer))
            ch = grpc.intercept_channel(ch, CutLink(lambda: peer in self.cut, f"the link {self.id}–{peer} "
                                                                              "is cut (streamglobe network cut)"))
            self._channels[key] = ch
            self._dialled.setdefault(peer, time.monotonic())
        stub = self._stubs[key] = pb_grpc.SuperPeerStub(ch)
        return stub

    def forwarder(self, peer: str) -> Forwarder:
        """The ordered, batched, retried outbound queue of items towards a neighbour."""
        f = self.forwarders.get(peer)
        if f is None and self._stop.is_set():  # (stopping: nothing leaves any more)
            return Forwarder(self.id, peer, None, LinkCounters(), self.epoch)
        if f is None:
            counters = self.link_counters.setdefault(peer, LinkCounters())
            f = self.forwarders[peer] = Forwarder(self.id, peer, self.stub(peer, data=True), counters, self.epoch)
            f.start()  # (each starts with its first item, and stops with the channels)
        return f

    def discard(self, stream: str) -> None:
        """A stream removed here: nothing more of it is sent to any neighbour."""
        for f in list(self.forwarders.values()):
            f.discard(stream)

    def start(self) -> None:
        """Channels and forwarders open as they are first needed."""

    def cut_link(self, peer: str, cut: bool) -> list[str]:
        """Cut the link to a neighbour (``link_cut``), or restore it; the links cut now."""
        if peer not in self.detector.neighbours:
            raise NodeError("INVALID_ARGUMENT", f"{peer} is not a neighbour of {self.id} on the backbone "
                                                f"(neighbours: {', '.join(sorted(self.detector.neighbours))})")
        (self.cut.add if cut else self.cut.discard)(peer)
        if cut and peer in self.forwarders:  # (its open stream of batches breaks, as the wire would)
            self.forwarders[peer].interrupt()
        return sorted(self.cut)

    def stop(self) -> None:
        self._stop.set()
        for f in self.forwarders.values():
            f.stop()
        for ch in self._channels.values():
            ch.close()

    def _call(self, peer: str, method: str, request, handle: Callable[[object], T],
              required: bool, refusals: bool = False, timeout: float = CALL_TIMEOUT_S) -> T | None:
        """One RPC; an unreachable peer is recorded, then raises (``required``) or gives None.
        A refusal (the peer answered no: ``REFUSALS``) raises if ``required`` or ``refusals``.
        A peer of an earlier version that does not know the call (``UNIMPLEMENTED``) answered: a
        call not ``required`` gives None without taking it for unreachable."""
        try:
            if self._stop.is_set():
                raise _Stopped()
            try:
                reply = getattr(self.stub(peer), method)(request, timeout=timeout)
            except grpc.RpcError as exc:
                if not self._first_contact(peer, exc):
                    raise
                reply = getattr(self.stub(peer), method)(request, timeout=FIRST_CONTACT_WAIT_S,
                                                         wait_for_ready=True)
            self.unreachable.pop(peer, None)
            self._answered.add(peer)
            return handle(reply)
        except (grpc.RpcError, _Stopped, ValueError) as exc:
            # ValueError: the channel was closed because this node is stopping
            code = exc.code() if isinstance(exc, grpc.RpcError) else None
            if (required or refusals) and code in REFUSALS:  # (it answered: not unreachable, its reason as it is)
                raise NodeError(code.name, f"super-peer {peer} refused: {exc.details()}") from None  # type: ignore[union-attr]
            if code == grpc.StatusCode.UNIMPLEMENTED and not required:
                return None
            self.unreachable[peer] = (f"{code.name}: {exc.details()}" if code is not None  # type: ignore[union-attr]
                                      else "this super-peer is stopping")
            if required:
                raise NodeError("UNAVAILABLE", f"super-peer {peer} is unreachable: "
                                               f"{self.unreachable[peer]}") from None
            return None

    def _first_contact(self, peer: str, exc: grpc.RpcError) -> bool:
        """Whether a call found ``peer`` unreachable while it may only be starting: it never
        answered, and was first dialled a moment ago (``FIRST_CONTACT_S``)."""
        return (exc.code() == grpc.StatusCode.UNAVAILABLE and peer not in self._answered  # type: ignore[union-attr]
                and peer not in self.cut
                and time.monotonic() - self._dialled.get(peer, 0.0) < FIRST_CONTACT_S)

    # ------------------------------------------------------------------ PeerLink

    def lookup(self, peer: str, input_stream: InputStream,
               statistics_of: int | None = None) -> tuple[list[NetworkStream], dict] | None:
        if peer == self.id:
            streams, usage = self.local.lookup(input_stream)
            return [copy_stream(s) for s in streams], usage
        request = pb.LookupStreamsRequest(input_json=input_to_wire(input_stream),
                                          with_statistics=statistics_of is not None, sample_of=statistics_of or 0)
        return self._call(peer, "LookupStreams", request,
                          lambda r: (self.parses.streams(r.streams_json),
                                     with_statistics(json.loads(r.usage_json), r.statistics_json)), required=False)

    def statistics(self, peer: str, name: str, sample_of: int = 0) -> dict:
        if peer == self.id:
            return self.local.statistics(name, sample_of)
        got = self._call(peer, "GetStatistics", pb.GetStatisticsRequest(stream=name, sample_of=sample_of),
                         lambda r: json.loads(r.json), required=True)
        assert got is not None
        return got

    def announce(self, peer: str, stream: NetworkStream) -> list[Waiting] | None:
        if peer == self.id:
            return self.local.announce(copy_stream(stream))
        return self._call(peer, "AnnounceStream",
                          pb.AnnounceStreamRequest(stream_json=json.dumps(stream_to_json(stream))),
                          lambda r: waiting_from_wire(r.waiting_json), required=False)

    def find_stream(self, peer: str, name: str) -> NetworkStream | None:
        if peer == self.id:
            return self.local.find_stream(name)
        return self._call(peer, "FindStream", pb.FindStreamRequest(name=name),
                          lambda r: stream_from_json(json.loads(r.stream_json)) if r.stream_json else None,
                          required=False)

    def activate(self, peer: str, subscription: str) -> None:
        if peer == self.id:
            self.local.activate(subscription)
            return
        self._call(peer, "Activate", pb.ActivateRequest(subscription=subscription), lambda r: None,
                   required=False)

    def reserve(self, peer: str, txn: str, streams: list[NetworkStream], subscription: str,
                target: str, version: int | None = None, attach: dict | None = None,
                pins: list[str] | None = None) -> Reserved:
        if peer == self.id:
            return self.local.reserve(txn, [copy_stream(s) for s in streams], subscription, target,
                                      version, attach, pins=pins)
        got = self._call(peer, "Reserve", pb.ReserveRequest(
            transaction=txn, part_json=part_to_wire(streams, subscription, target, version, attach, pins)),
            lambda r: Reserved.of(r.ok, r.reason, json.loads(r.answer_json or "{}")), required=False)
        return got if got is not None else Reserved(False, f"{peer} is unreachable ({self.unreachable[peer]})")

    def commit(self, peer: str, txn: str, subscription: str, lineage: list[str],
               required: bool, replay: dict[str, int] | None = None,
               since: dict[str, float] | None = None, held: list[str] | None = None) -> Committed:
        if peer == self.id:
            return Committed.of(self.local.commit(txn, subscription, lineage, replay, since, held), self.epoch)
        got = self._call(peer, "Commit", pb.CommitRequest(
            transaction=txn, commit_json=commit_to_wire(subscription, lineage, replay, since, held)),
            lambda r: Committed.of(json.loads(r.starts_json or "{}"), r.incarnation), required=required)
        return got or Committed({})

    def abort(self, peer: str, txn: str) -> bool | None:
        if peer == self.id:
            return self.local.abort(txn)
        return self._call(peer, "Abort", pb.AbortRequest(transaction=txn), lambda r: r.hold_lapsed,
                          required=False)

    def remove(self, peer: str, subscription: str) -> list[str] | None:
        if peer == self.id:
            return self.local.remove(subscription)
        return self._call(peer, "Remove", pb.RemoveRequest(subscription=subscription),
                          lambda r: list(r.removed), required=False)

    def truncate(self, peer: str, stream: str, last: str) -> None:
        if peer == self.id:
            self.local.truncate(stream, last)
            return
        self._call(peer, "Truncate", pb.TruncateRequest(stream=stream, peer=last), lambda r: None,
                   required=False)

    def count_anchor(self, peer: str, stream: str) -> tuple[Anchor | None, str]:
        if peer == self.id:
            return self.local.count_anchor(stream)
        got = self._call(peer, "CountAnchor", pb.CountAnchorRequest(stream=stream),
                         lambda r: (Anchor(r.origin, r.ordinal) if r.known else None, r.reason), required=False,
                         refusals=True)
        return got or (None, f"{peer} did not answer")

    def align_count(self, peer: str, stream: str, anchor: Anchor) -> Aligned | None:
        if peer == self.id:
            return self.local.align_count(stream, anchor)
        request = pb.AlignCountRequest(stream=stream, origin=anchor.origin, ordinal=anchor.ordinal)
        return self._call(peer, "AlignCount", request, lambda r: Aligned(r.aligned, r.later, r.reason),
                          required=False, refusals=True)  # (a refusal fails the move: asking again would not help)

    def claim_lowering(self, peer: str, neighbour: str, subscription: str, priority: float) -> Grant | None:
        if peer == self.id:
            return self.local.claim_lowering(neighbour, subscription, priority)
        request = pb.ClaimLoweringRequest(neighbour=neighbour, subscription=subscription, priority=priority)
        try:  # (briefly: a silent sender is not waited for, the re-optimisation thread has switches to finish)
            return self._call(peer, "ClaimLowering", request, lambda r: Grant(r.granted, r.reason), required=False,
                              refusals=True, timeout=CLAIM_TIMEOUT_S)
        except NodeError as exc:  # (it answered no)
            return Grant(False, exc.message)

    def widen_stream(self, peer: str, txn: str, step: str, wide: NetworkStream, was: NetworkStream) -> None:
        if peer == self.id:
            self.local.widen_stream(txn, step, copy_stream(wide), copy_stream(was))
            return
        wide_json, was_json = widening_to_wire(wide, was)
        request = pb.WidenStreamRequest(transaction=txn, step=step, wide_json=wide_json, was_json=was_json)
        done = self._call(peer, "WidenStream", request, lambda r: True, required=False, refusals=True)
        if done is None:  # (unreachable, or a peer of an earlier version without the call)
            raise NodeError("UNAVAILABLE", f"super-peer {peer} did not take the widening of {wide.id}")

    # ------------------------------------------------------------------ heartbeats

    def heartbeat_round(self, requests: dict[str, Gossip], timeout: float | None = None) -> dict[str, Answer | Silence]:
        """Ask each peer at once (``recovery.heartbeats``); its answer, or why there was none.
        A round takes at most one heartbeat interval, however many peers are silent."""
        timeout = timeout or self._heartbeat_timeout()
        calls = {}
        for peer, gossip in requests.items():
            if peer == self.id or self._stop.is_set():
                continue
            try:
                calls[peer] = self.stub(peer).Heartbeat.future(_heartbeat(gossip), timeout=timeout)
            except ValueError:  # channel closed: stopping
                return {}
        out: dict[str, Answer | Silence] = {}
        for peer, call in calls.items():
            try:
                out[peer] = self._answer(peer, call.result())
            except grpc.RpcError as exc:
                if self._stop.is_set():
                    return out  # our channels are closing: not the peers' silence
                out[peer] = self._silence(peer, exc)
            except (ValueError, grpc.FutureCancelledError):  # stopping
                continue
        return out

    def gossip(self, requests: dict[str, Gossip], answered: Callable[[Answer], None]) -> None:
        """Send each heartbeat without waiting; ``answered`` gets each answer as it comes."""
        timeout = self._heartbeat_timeout()
        for peer, gossip in requests.items():
            if peer == self.id or self._stop.is_set():
                continue
            try:
                call = self.stub(peer).Heartbeat.future(_heartbeat(gossip), timeout=timeout)
            except ValueError:  # channel closed: stopping
                return

            def done(call, peer=peer) -> None:
                try:
                    answered(self._answer(peer, call.result()))
                except grpc.RpcError as exc:
                    if not self._stop.is_set():
                        self._silence(peer, exc)
                except (ValueError, grpc.FutureCancelledError):
                    pass
                except Exception:  # noqa: BLE001 - a callback's failure must not be lost silently
                    log.exception("%s: taking a gossip answer of %s failed", self.id, peer)
            call.add_done_callback(done)

    def relay_probe(self, relays, target: str) -> bool:
        """Whether any of ``relays`` reaches ``target`` (SWIM's indirect probe)."""
        timeout = 1.5 * self._heartbeat_timeout()  # (theirs, and half of it)
        answers = self.heartbeat_round({p: Gossip(self.id, relay_to=target) for p in relays}, timeout)
        return any(isinstance(a, Answer) and a.relayed for a in answers.values())

    def probe(self, target: str) -> bool:
        """Whether ``target`` answers a plain heartbeat now (asked by another peer's indirect
        probe; a cut link from here to it fails as the wire would)."""
        if target == self.id or self._stop.is_set():
            return target == self.id
        try:
            self.stub(target).Heartbeat(_heartbeat(Gossip(self.id)),
                                        timeout=self._heartbeat_timeout() / 2)
            return True
        except grpc.RpcError as exc:
            return exc.code() not in SILENT
        except ValueError:
            return False

    def _heartbeat_timeout(self) -> float:
        """A heartbeat's deadline: within a round, however many peers are silent."""
        return min(HEARTBEAT_TIMEOUT_S, self.detector.settings.interval_s)

    def _answer(self, peer: str, reply) -> Answer:
        self.unreachable.pop(peer, None)
        self._answered.add(peer)
        return Answer(peer, frozenset(reply.hears), reply.incarnation, reply.records_json, reply.relayed,
                      reply.digest_hash)

    def _silence(self, peer: str, exc: grpc.RpcError) -> Silence:
        reason = f"{exc.code().name}: {exc.details()}"
        self.unreachable[peer] = reason
        return Silence(reason, exc.code() in SILENT)

    def status(self) -> dict:
        return {
            "links": {f"{self.id}->{n}": {"items": c.items, "bytes": c.bytes, "batches": c.batches,
                                          "errors": c.errors, "last_error": c.last_error,
                                          "dropped": c.dropped, "held_items": c.held_items,
                                          "held_bytes": c.held_bytes, "peak_held_bytes": c.peak_held_bytes,
                                          "pressure": c.pressure}
                      for n, c in list(self.link_counters.items())},
            "unreachable_peers": dict(self.unreachable),
            "peers_last_heard_s_ago": {p: round(time.time() - h.last_heard, 1)
                                       for p, h in list(self.detector.peers.items()) if h.last_heard is not None},
            "failure_detector": self.detector.status(time.time()),
            "cut_links": sorted(self.cut),
        }


def _heartbeat(gossip: Gossip) -> pb.HeartbeatRequest:
    return pb.HeartbeatRequest(sender=gossip.sender, digest_json=gossip.digest, records_json=gossip.records,
                               relay_to=gossip.relay_to)
