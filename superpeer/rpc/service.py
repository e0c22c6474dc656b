"""gRPC servicers: one method per RPC, thin over ``Node``; errors become status codes. Thin-peer
calls are checked against the caller's token (``security.access``), super-peer calls against the caller's
backbone certificate (``security.tls``)."""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Sequence

import grpc

from proto import streamglobe_pb2 as pb
from proto import streamglobe_pb2_grpc as pb_grpc

from sharing.serialization import stream_from_json, stream_to_json
from wxquery.operators.count_alignment import Anchor

from ..data.backpressure import HELD_BACK, TICK_S
from ..data.forwarding import REFUSED_NAMES
from ..data.origins import of_batch
from ..data.wire_batch import WireBatch, check_lengths, check_utf8
from ..node import Node, NodeError
from ..recovery.membership import Gossip
from ..security.access import Access, UserQuotas
from ..security.audit import deny
from ..security.peer_access import check_backbone_caller
from ..security.tls import Security, peer_identity
from ..subscriptions.approximation import COARSEST, CONFIDENCE
from ..subscriptions.record import past_text
from .stream_wire import StaticTexts
from .wire import commit_from_wire, input_from_wire, part_from_wire, waiting_to_wire, widening_from_wire

log = logging.getLogger("streamglobe.superpeer")
MAX_WAIT_MS = 30_000  # a result read waits at most this long for new results
ANSWER_WITHIN_S = 60.0  # a call held back (back-pressure) is answered by then at the latest


def _handled(method):
    """NodeError → its status code; anything unexpected → INTERNAL with the reason (logged),
    so that a bad request never takes the daemon down. Methods raise NodeError and never call
    ``context.abort`` themselves: abort raises a bare exception, which the generic handler
    would turn into an INTERNAL error without the message."""

    @functools.wraps(method)
    def wrapper(self, request, context):
        try:
            return method(self, request, context)
        except NodeError as exc:
            context.abort(getattr(grpc.StatusCode, exc.code, grpc.StatusCode.UNKNOWN), exc.message)
        except Exception as exc:  # noqa: BLE001 - the daemon must keep serving
            log.exception("%s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL,
                          f"{method.__name__} failed: {type(exc).__name__}: {exc}")

    return wrapper


class ThinPeerService(pb_grpc.ThinPeerServicer):
    def __init__(self, node: Node, security: Security | None = None, quotas: UserQuotas | None = None) -> None:
        self.node = node
        self.access = Access(node, security, quotas)

    @_handled
    def RegisterStream(self, request, context):
        grant = self.access.grant(context, "RegisterStream")
        self.access.register(grant, request.name)
        history = self.node.register_stream(request.name, request.root, request.item, request.rate,
                                            request.event_time, request.event_time_rate or 1.0,
                                            publisher=grant.user, history=request.history)
        return pb.RegisterStreamReply(stream=request.name, superpeer=self.node.id, history=history,
                                      max_item_bytes=self.node.state.limits.max_item_bytes,
                                      next_position=self.node.data.next_position(request.name))

    @_handled
    def Publish(self, request, context):
        self.access.publish(self.access.grant(context, "Publish"), request.stream, len(request.items))
        # items arrive as bytes: one that is not UTF-8 is rejected alone, with its number
        done = self.node.publish(request.stream, list(request.items), request.first_sequence,
                                 request.position if request.HasField("position") else None,
                                 until=_answer_by(context))
        return pb.PublishReply(accepted=done.accepted, rejected=done.rejected, rejections=done.reasons,
                               next_position=done.next_position, duplicates=done.duplicates,
                               held_back_s=done.held_back_s, held_back=done.held_back)

    @_handled
    def CloseStream(self, request, context):
        self.access.close(self.access.grant(context, "CloseStream"), request.stream)
        return pb.CloseStreamReply(items=self.node.close_stream(request.stream))

    @_handled
    def Subscribe(self, request, context):
        grant = self.access.grant(context, "Subscribe")
        self.access.subscribe(grant)
        try:
            record = self.node.subscribe(request.query, request.strategy, request.wait_for_streams,
                                         cancelled=lambda: not context.is_active(),
                                         time_remaining=context.time_remaining(), user=grant.user,
                                         from_start=request.from_start,
                                         since_s=request.since_s if request.HasField("since_s") else None,
                                         approximate=request.approximate,
                                         confidence=request.confidence if request.HasField("confidence") else CONFIDENCE,
                                         min_rate=request.min_rate if request.HasField("min_rate") else COARSEST,
                                         weight=request.weight if request.HasField("weight") else 1.0)
        finally:
            self.access.subscribed(grant)
        return pb.SubscribeReply(subscription=record.runtime.id,
                                 plan_json=json.dumps(record.plan.to_json() if record.plan else {}),
                                 description=record.describe(), history=record.history, sample=record.sample,
                                 warnings=[str(w) for w in record.runtime.analysis.warnings])

    @_handled
    def Unsubscribe(self, request, context):
        self.access.subscription(self.access.grant(context, "Unsubscribe"), request.subscription, "unsubscribe")
        return pb.UnsubscribeReply(removed_streams=self.node.unsubscribe(request.subscription))

    @_handled
    def ReadResults(self, request, context):
        self.access.subscription(self.access.grant(context, "ReadResults"), request.subscription, "read")
        buffer, (offset, items, closed, lost) = self.node.read_results(
            request.subscription, request.offset, request.max_items, min(request.wait_ms, MAX_WAIT_MS) / 1000,
            request.peek)
        if buffer.error and closed:
            raise NodeError(buffer.code or "INTERNAL",
                            f"subscription {request.subscription} failed: {buffer.error}")
        record = self.node.control.subscriptions.get(request.subscription)
        estimates = record.runtime.estimates if record is not None else None
        past = past_text(self.node.control.past_progress(record)) if record is not None and not closed else ""
        return pb.ReadResultsReply(offset=offset, items=items, closed=closed, root=buffer.root, past=past,
                                   dropped=lost, degraded=record.degraded if record is not None else "",
                                   approximation=estimates.xml(offset, len(items), closed) if estimates else "")

    @_handled
    def Status(self, request, context):
        grant = self.access.grant(context, "Status")
        return pb.StatusReply(json=json.dumps(self.access.status(grant, self.node.status())))

    @_handled
    def CutLink(self, request, context):
        grant = self.access.grant(context, "CutLink")
        self.access.administer(grant, f"{'CutLink' if request.cut else 'RestoreLink'} {request.peer}")
        return pb.CutLinkReply(cut=self.node.cut_link(request.peer, request.cut))


def _peers_only(method):
    """Super-peer calls: on a secure network the caller must present a certificate of this
    backbone's CA naming one of its super-peers (mutual TLS on the peer address); its id is
    passed on (None on an insecure network)."""

    @functools.wraps(method)
    def wrapper(self, request, context):
        caller = None
        if self.security is not None:
            caller = peer_identity(context)
            check_backbone_caller(caller, self.node.topology.backbone.peers, method.__name__, context.peer())
        return method(self, request, context, caller)

    return wrapper


class SuperPeerService(pb_grpc.SuperPeerServicer):
    """The super-peer RPCs: their JSON payloads (``wire``) decoded into the node's own types."""

    def __init__(self, node: Node, security: Security | None = None) -> None:
        self.node = node
        self.security = security
        self.texts = StaticTexts()  # (lookup answers: each stream's fixed part printed once)

    @_handled
    @_peers_only
    def LookupStreams(self, request, context, caller):
        input_stream = input_from_wire(request.input_json)
        streams, usage = self.node.lookup(input_stream)
        statistics = ""
        if request.with_statistics:
            try:
                statistics = json.dumps(self.node.statistics(input_stream.stream, request.sample_of))
            except NodeError:  # (not registered here: the caller asks GetStatistics, which says why)
                pass
        return pb.LookupStreamsReply(streams_json=self.texts.answer(streams),
                                     usage_json=json.dumps(usage), statistics_json=statistics)

    @_handled
    @_peers_only
    def GetStatistics(self, request, context, caller):
        return pb.GetStatisticsReply(json=json.dumps(self.node.statistics(request.stream, request.sample_of)))

    @_handled
    @_peers_only
    def AnnounceStream(self, request, context, caller):
        stream = stream_from_json(json.loads(request.stream_json))
        return pb.AnnounceStreamReply(waiting_json=waiting_to_wire(self.node.announce(stream, caller)))

    @_handled
    @_peers_only
    def FindStream(self, request, context, caller):
        found = self.node.find_stream(request.name)
        return pb.FindStreamReply(stream_json=json.dumps(stream_to_json(found)) if found is not None else "")

    @_handled
    @_peers_only
    def Activate(self, request, context, caller):
        ok, reason = self.node.activate(request.subscription)
        return pb.ActivateReply(ok=ok, reason=reason)

    @_handled
    @_peers_only
    def Reserve(self, request, context, caller):
        streams, subscription, target, version, attach, pins = part_from_wire(request.part_json)
        got = self.node.reserve(request.transaction, streams, subscription, target, version, attach, caller=caller,
                                pins=pins)
        return pb.ReserveReply(ok=got.ok, reason=got.reason, answer_json=json.dumps(got.to_json()))

    @_handled
    @_peers_only
    def Commit(self, request, context, caller):
        subscription, lineage, replay, since, held = commit_from_wire(request.commit_json)
        starts = self.node.commit(request.transaction, subscription, lineage, replay, since, held, caller=caller)
        return pb.CommitReply(starts_json=json.dumps(starts), incarnation=self.node.epoch)

    @_handled
    @_peers_only
    def Abort(self, request, context, caller):
        return pb.AbortReply(hold_lapsed=self.node.abort(request.transaction, caller))

    @_handled
    @_peers_only
    def Remove(self, request, context, caller):
        return pb.RemoveReply(removed=self.node.remove(request.subscription, caller))

    @_handled
    @_peers_only
    def Truncate(self, request, context, caller):
        self.node.truncate(request.stream, request.peer, caller)
        return pb.TruncateReply()

    @_handled
    @_peers_only
    def CountAnchor(self, request, context, caller):
        anchor, reason = self.node.count_anchor(request.stream, caller)
        if anchor is None:
            return pb.CountAnchorReply(known=False, reason=reason)
        return pb.CountAnchorReply(known=True, origin=anchor.origin, ordinal=anchor.ordinal)

    @_handled
    @_peers_only
    def AlignCount(self, request, context, caller):
        got = self.node.align_count(request.stream, Anchor(request.origin, request.ordinal), caller)
        return pb.AlignCountReply(aligned=got.aligned, later=got.later, reason=got.reason)

    @_handled
    @_peers_only
    def ClaimLowering(self, request, context, caller):
        got = self.node.claim_lowering(request.neighbour, request.subscription, request.priority, caller)
        return pb.ClaimLoweringReply(granted=got.granted, reason=got.reason)

    @_handled
    @_peers_only
    def WidenStream(self, request, context, caller):
        wide, was = widening_from_wire(request.wide_json, request.was_json)
        self.node.widen_stream(request.transaction, request.step, wide, was, caller=caller)
        return pb.WidenStreamReply()

    @_handled
    @_peers_only
    def Transfer(self, request, context, caller):
        held = self.node.room_for(request.stream, _answer_by(context))
        if held:
            raise NodeError("UNAVAILABLE", HELD_BACK + held)
        return pb.TransferReply(acknowledged=self._transfer(request, caller))

    def Transfers(self, requests, context):
        """A link's stream of batches: each taken in order and acknowledged. A batch refused for
        good (``REFUSED_NAMES``) is answered as refused and the stream goes on; any other error
        ends the stream with its status, and the sender sends what it has in flight again."""
        try:
            caller = None
            if self.security is not None:
                caller = peer_identity(context)
                check_backbone_caller(caller, self.node.topology.backbone.peers, "Transfers", context.peer())
            # (a sender's stream refused once: its later batches too, so no hole is left behind)
            refused: dict[tuple[str, str], NodeError] = {}
            for request in requests:
                key = (request.sender, request.stream)
                # back-pressure: taken only when the links it leaves on have room; until then the
                # sender hears why every few seconds (its clock for a stuck neighbour restarts)
                while key not in refused and (held := self.node.room_for(request.stream, time.monotonic() + TICK_S)):
                    yield pb.TransferReply(pressure=held)
                try:
                    if key in refused:
                        raise refused[key]
                    acknowledged = self._transfer(request, caller)
                except NodeError as exc:
                    if exc.code not in REFUSED_NAMES:
                        raise
                    refused[key] = exc
                    yield pb.TransferReply(refused_code=exc.code, refused=exc.message)
                    continue
                yield pb.TransferReply(acknowledged=acknowledged)
        except NodeError as exc:
            context.abort(getattr(grpc.StatusCode, exc.code, grpc.StatusCode.UNKNOWN), exc.message)
        except Exception as exc:  # noqa: BLE001 - the daemon must keep serving
            if context.is_active():
                log.exception("Transfers failed")
                context.abort(grpc.StatusCode.INTERNAL, f"Transfers failed: {type(exc).__name__}: {exc}")

    def _transfer(self, request, caller: str | None) -> int:
        watermark = (request.watermark_path, request.watermark) if request.watermark_path else None
        items = received_items(request)
        origins = of_batch(request.numbered_by_origin, request.origins, request.first_sequence, len(items))
        return self.node.transfer(request.stream, items, request.end, request.sender, request.sender_epoch,
                                  request.first_sequence, watermark, caller=caller, origins=origins)

    @_handled
    @_peers_only
    def Heartbeat(self, request, context, caller):
        answer = self.node.heartbeat_reply(Gossip(request.sender, request.digest_json, request.records_json,
                                                  request.relay_to))
        return pb.HeartbeatReply(superpeer=answer.peer, hears=sorted(answer.hears), incarnation=answer.incarnation,
                                 records_json=answer.records, relayed=answer.relayed,
                                 digest_hash=answer.digest_hash)


def _answer_by(context) -> float:
    """When a wait inside a call must end (monotonic) so that the caller still hears the answer:
    a second before its deadline, and within a minute."""
    left = context.time_remaining()
    left = ANSWER_WITHIN_S if left is None else min(ANSWER_WITHIN_S, left - 1.0)
    return time.monotonic() + max(left, 0.1)


def received_items(request: pb.TransferRequest) -> Sequence[str]:
    """A batch's items: its buffer as it came (``wire_batch``), or its list of texts."""
    if not request.lengths:
        return list(request.items)
    why = check_lengths(request.payload, request.lengths)
    if not why and not request.payload.isascii():
        why = check_utf8(request.payload, request.lengths)
    if why:
        raise NodeError("INVALID_ARGUMENT", f"a malformed batch of {request.stream}: {why}")
    return WireBatch(request.payload, request.lengths)


def refused_super_peer_calls(peer: str) -> grpc.GenericRpcHandler:
    """On the thin-peer address, every super-peer call is refused with PERMISSION_DENIED (and
    logged): they are taken only on the peer address, from a backbone certificate."""
    service = pb.DESCRIPTOR.services_by_name["SuperPeer"]

    def refuse(method):
        def handler(request, context):
            err = deny("", f"{method.name} from {context.peer()} at {peer}'s thin-peer address",
                       f"{method.name} is a super-peer call: it is taken only on the peer address, with a "
                       "certificate of the backbone naming one of its super-peers")
            context.abort(grpc.StatusCode.PERMISSION_DENIED, err.message)
        if method.client_streaming:
            return grpc.stream_stream_rpc_method_handler(handler)
        return grpc.unary_unary_rpc_method_handler(handler)

    return grpc.method_handlers_generic_handler(service.full_name, {m.name: refuse(m) for m in service.methods})
