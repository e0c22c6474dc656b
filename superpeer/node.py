"""One super-peer's state and behaviour, independent of gRPC plumbing.

* **Stream property table**: every stream present at this peer (its route passes here).
* **Data plane**: items of a stream reach the peer (published here, or transferred from the
  previous peer of the route); local derived streams are computed by their operator pipelines
  (the ``inline`` executor), the stream is forwarded to its next hops, and subscriptions
  delivered here are post-processed. Items are parsed only where an operator or a subscription
  needs their values; pure forwarding passes the wire text on.
* **Control plane**: SUBSCRIBE for subscriptions registered here runs the shared planner over a
  view whose stream tables come from the visited peers over gRPC; the chosen plan is installed in
  two phases (reserve capacity on every affected peer, then commit; a failed reservation aborts
  and re-plans). Unsubscribe removes, on every peer, what no subscription uses any more.

Every public method raises ``NodeError`` with a gRPC status name and a message a person can act
on; nothing a thin peer or a neighbour sends can crash the daemon.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

import grpc
from lxml import etree

from proto import streamglobe_pb2 as pb
from proto import streamglobe_pb2_grpc as pb_grpc
from sharing.analysis import analyze
from sharing.matching import raw_properties
from sharing.network_state import NetworkStream
from sharing.planner import Plan, Planner, RegistrationError, Strategy
from sharing.properties import InputStream
from sharing.serialization import (input_from_json, statistics_from_json, statistics_to_json,
                                   stream_from_json, stream_to_json)
from sharing.statistics import StreamEstimate, StreamStatistics
from wxquery.errors import WXQueryError
from wxquery.operators.records import WindowRecord, serialize

from .executors import Executor, make_executor
from .forwarding import Forwarder, LinkCounters
from .subscriptions import SubscriptionRuntime
from .topology import Topology

STATISTICS_FULL = 2000  # observe every item up to this many, then every 50th
MAX_REJECTION_REASONS = 20
REPLANS = 3
MIN_RATE_WINDOW_S = 10.0


class _Stopped(Exception):
    """An RPC was attempted while this node is stopping."""


class NodeError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class OriginalState:
    """A stream registered at this peer by a publisher."""

    name: str
    root: str
    item: str
    accepted: int = 0
    rejected: int = 0
    closed: bool = False
    statistics: StreamStatistics = field(default_factory=StreamStatistics)
    rate: float = 0.0
    first_arrival: float = 0.0


@dataclass
class SubscriptionRecord:
    runtime: SubscriptionRuntime
    plan: Plan | None  # None while waiting for a stream to be registered
    inputs: dict[str, str]  # variable -> delivered stream id
    strategy: Strategy = Strategy.SHARING
    waiting_for: tuple[str, ...] = ()
    error: str = ""
    registered_at: float = field(default_factory=time.time)

    def describe(self) -> str:
        if self.plan is not None:
            return self.plan.describe()
        if self.error:
            return f"{self.runtime.id}: {self.error}"
        names = ", ".join(f'"{n}"' for n in self.waiting_for)
        return (f"{self.runtime.id}: waiting for stream {names} to be registered (no super-peer "
                "has it yet); it is planned and installed before the first item is published")


class Node:
    def __init__(self, peer: str, topology: Topology, retention: int = 500_000,
                 executor: str = "inline", executor_options: dict | None = None) -> None:
        if peer not in topology.backbone.peers:
            raise NodeError("INVALID_ARGUMENT", f"{peer} is not a super-peer of the topology")
        try:
            self.executor: Executor = make_executor(executor, peer, **(executor_options or {}))
        except ValueError as exc:
            raise NodeError("UNIMPLEMENTED", str(exc)) from None
        self.id = peer
        self.topology = topology
        self.backbone = topology.backbone
        self.retention = retention
        self.lock = threading.RLock()
        self.entries: dict[str, NetworkStream] = {}
        self.children: dict[str, list[str]] = {}
        self.deliveries: dict[str, list[tuple[SubscriptionRuntime, str]]] = {}
        self.originals: dict[str, OriginalState] = {}
        self.known_originals: dict[str, NetworkStream] = {}
        self.subscriptions: dict[str, SubscriptionRecord] = {}
        self.pending: dict[str, list[NetworkStream]] = {}
        self.peer_usage: dict[str, dict] = {}  # what other peers last reported
        self.alive: dict[str, float] = {}
        self.unreachable: dict[str, str] = {}
        self.link_counters: dict[str, LinkCounters] = {}
        self.forwarders: dict[str, Forwarder] = {}
        self.unknown_transfers = 0
        self.bad_transfers = 0
        self.last_bad_transfer = ""
        self._channels: dict[str, grpc.Channel] = {}
        self._ids = itertools.count(1)
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, name=f"hb-{peer}", daemon=True)
        self.executor_seqs: dict[str, int] = {}
        self.executor.set_deliver(self._executor_output)

    # ================================================================== lifecycle

    def start(self) -> None:
        self._heartbeat.start()

    def stop(self) -> None:
        self._stop.set()
        for f in self.forwarders.values():
            f.stop()
        for record in self.subscriptions.values():
            record.runtime.stop()
        for ch in self._channels.values():
            ch.close()
        self.executor.stop()

    def stub(self, peer: str) -> pb_grpc.SuperPeerStub:
        ch = self._channels.get(peer)
        if ch is None:
            ch = self._channels[peer] = grpc.insecure_channel(
                self.topology.address(peer),
                options=[("grpc.max_receive_message_length", 64 << 20),
                         ("grpc.max_send_message_length", 64 << 20)])
        return pb_grpc.SuperPeerStub(ch)

    def new_stream_id(self) -> str:
        return f"{self.id}.{next(self._ids)}"

    # ================================================================== publishers

    def register_stream(self, name: str, root: str, item: str, rate: float) -> None:
        if not name or not root or not item:
            raise NodeError("INVALID_ARGUMENT", "a stream needs a name, a root element and an item element")
        with self.lock:
            known = self.known_originals.get(name)
            if known is not None and known.origin != self.id:
                raise NodeError("ALREADY_EXISTS", f'stream "{name}" is already registered at {known.origin}')
            state = self.originals.get(name)
            if state is not None:
                if state.closed:
                    raise NodeError("FAILED_PRECONDITION", f'stream "{name}" was closed; register it under a new name')
                return  # a publisher reconnecting
            inp = InputStream(name, (root, item))
            state = OriginalState(name, root, item, statistics=StreamStatistics(frequency=rate), rate=rate)
            self.originals[name] = state
            stream = NetworkStream(id=name, input=inp, properties=raw_properties(inp), kind="items",
                                   origin=self.id, parent=None, operators=(), route=(self.id,),
                                   estimate=StreamEstimate(rate, 0.0), original=True)
            self.entries[name] = stream
            self.known_originals[name] = stream
        # Synchronously, before the publisher gets the reply: every super-peer reports the
        # subscriptions waiting for this stream, and they are planned and installed one after
        # the other in the order they were registered (so later ones can reuse earlier ones'
        # streams) — all of them see the stream from its first item.
        request = pb.AnnounceStreamRequest(stream_json=json.dumps(stream_to_json(stream)))
        waiting: list[tuple[float, str, str]] = []

        def announce(peer: str) -> None:
            got = self._call(peer, "AnnounceStream", request,
                             lambda r: json.loads(r.waiting_json or "[]"), required=False)
            for w in got or []:
                waiting.append((w["registered_at"], peer, w["subscription"]))

        threads = [threading.Thread(target=announce, args=(peer,), daemon=True)
                   for peer in self.backbone.peers if peer != self.id]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        waiting.extend((r.registered_at, self.id, r.runtime.id) for r in self.ready_waiting())
        for _, peer, sid in sorted(waiting):
            self._call(peer, "Activate", pb.ActivateRequest(subscription=sid), lambda r: None,
                       required=False)

    def publish(self, name: str, items: list[str]) -> tuple[int, int, list[str]]:
        state = self.originals.get(name)
        if state is None:
            where = self.known_originals.get(name)
            hint = f" (it is registered at {where.origin})" if where else "; register it first"
            raise NodeError("NOT_FOUND", f'stream "{name}" is not registered at {self.id}{hint}')
        if state.closed:
            raise NodeError("FAILED_PRECONDITION", f'stream "{name}" is closed')
        accepted_values, accepted_text, reasons = self._validate(state, items)
        rejected = len(items) - len(accepted_values)
        now = time.monotonic()
        with self.lock:
            stats = state.statistics
            for el in accepted_values:
                if stats.items < STATISTICS_FULL or state.accepted % 50 == 0:
                    stats.observe(el)
                state.accepted += 1
            if state.rate <= 0:
                # Measured rate; a file published in one burst is not a sustained rate, so the
                # elapsed time counts at least MIN_RATE_WINDOW_S.
                state.first_arrival = state.first_arrival or now
                stats.frequency = state.accepted / max(now - state.first_arrival, MIN_RATE_WINDOW_S)
            state.rejected += rejected
            entry = self.entries.get(name)
            if entry is not None and stats.items:
                entry.estimate = StreamEstimate(stats.frequency, stats.avg_item_size)
            self._ingest(name, accepted_values, False, accepted_text)
        return len(accepted_values), rejected, reasons

    @staticmethod
    def _validate(state: OriginalState, items: list[str]) -> tuple[list, list[str], list[str]]:
        """Parse and check a batch of items: one parse for the whole batch when it is clean,
        item by item (to name the bad ones) when it is not."""
        try:
            batch = etree.fromstring(("<b>" + "".join(items) + "</b>").encode("utf-8"), parser=_PARSER)
            values = list(batch)
            if len(values) == len(items) and all(el.tag == state.item for el in values):
                for el in values:
                    el.tail = None
                return values, items, []
        except etree.XMLSyntaxError:
            pass
        values, texts, reasons = [], [], []
        for k, text in enumerate(items):
            try:
                el = etree.fromstring(text.encode("utf-8"), parser=_PARSER)
                if el.tag != state.item:
                    raise ValueError(f"element <{el.tag}> is not a <{state.item}> item")
            except (etree.XMLSyntaxError, ValueError) as exc:
                if len(reasons) < MAX_REJECTION_REASONS:
                    reasons.append(f"item {state.accepted + state.rejected + k}: {exc}")
                continue
            values.append(el)
            texts.append(text)
        return values, texts, reasons

    def close_stream(self, name: str) -> int:
        state = self.originals.get(name)
        if state is None:
            raise NodeError("NOT_FOUND", f'stream "{name}" is not registered at {self.id}')
        with self.lock:
            if not state.closed:
                state.closed = True
                self._ingest(name, [], True, [])
        return state.accepted

    # ================================================================== data plane

    def transfer(self, stream: str, items: list[str], end: bool) -> int:
        received = len(items)
        with self.lock:
            entry = self.entries.get(stream)
            if entry is None:
                self.unknown_transfers += len(items)
                return len(items)  # acknowledged and dropped (counted): a removed stream
            self._ingest_text(entry, items, end)
        return received

    def _ingest_text(self, entry: NetworkStream, items: list[str], end: bool) -> None:
        """Wire text into the data plane, parsed only if something here reads values; an item
        that does not parse is dropped and counted, and the rest keeps flowing."""
        values: list = []
        if self._needs_values(entry.id):
            texts = []
            for x in items:
                try:
                    values.append(self._parse(entry, x))
                    texts.append(x)
                except (etree.XMLSyntaxError, ValueError, TypeError) as exc:
                    self.bad_transfers += 1
                    self.last_bad_transfer = f"stream {entry.id}: {exc}"
            items = texts
        self._ingest(entry.id, values, end, items)

    def _needs_values(self, stream: str) -> bool:
        """Items are parsed only where an operator or a subscription reads them; copies and
        forwarding pass the wire text on (recursively through copies)."""
        if self.deliveries.get(stream):
            return True
        for child in self.children.get(stream, ()):
            if self.executor.is_copy(child):
                if self._needs_values(child):
                    return True
            elif self.executor.needs_values(child):
                return True
        return False

    @staticmethod
    def _parse(entry: NetworkStream, text: str):
        if entry.kind == "records":
            return WindowRecord.from_xml(text)
        return etree.fromstring(text.encode("utf-8"), parser=_PARSER)

    def _ingest(self, sid: str, values: list, end: bool, serialized: list[str] | None) -> None:
        """Called with the lock held: derived streams, deliveries, forwarding."""
        entry = self.entries.get(sid)
        if entry is None:
            return
        computed = False
        for child in self.children.get(sid, ()):
            if self.executor.is_copy(child):  # duplicated here: same items, same wire text
                self._ingest(child, values, end, serialized)
            else:
                computed = True
        if computed:  # one push per parent, whatever the number of operators on it
            texts = None
            if self.executor.wants_text:
                texts = serialized if serialized is not None else [serialize(v) for v in values]
            self.executor.push(sid, values, texts, end)
        for runtime, variable in self.deliveries.get(sid, ()):
            runtime.feed(variable, values, end)
        hops = entry.next_hops(self.id)
        if hops and (values or serialized or end):
            text = serialized if serialized is not None else [serialize(v) for v in values]
            for n in hops:
                self._forwarder(n).send(sid, text, end)

    def _executor_output(self, stream: str, seq: int, outputs: list, end: bool) -> None:
        """A derived stream's new items from the executor (in order; a redelivery after an
        executor restart repeats sequence numbers, which are dropped here)."""
        with self.lock:
            expected = self.executor_seqs.get(stream, seq)
            self.executor_seqs[stream] = max(expected, seq + len(outputs))
            outputs = outputs[max(expected - seq, 0):]
            entry = self.entries.get(stream)
            if entry is None or not (outputs or end):
                return
            if self.executor.wants_text:
                self._ingest_text(entry, outputs, end)
            else:
                self._ingest(stream, outputs, end, None)

    def _forwarder(self, peer: str) -> Forwarder:
        f = self.forwarders.get(peer)
        if f is None:
            counters = self.link_counters.setdefault(peer, LinkCounters())
            f = self.forwarders[peer] = Forwarder(self.id, peer, self.stub(peer), counters)
        return f

    # ================================================================== subscriptions

    def subscribe(self, query: str, strategy: str = "sharing",
                  wait_for_streams: bool = False) -> SubscriptionRecord:
        try:
            analysis = analyze(query)
        except WXQueryError as exc:
            raise NodeError("INVALID_ARGUMENT", exc.format("query")) from None
        try:
            strat = Strategy(strategy or "sharing")
        except ValueError:
            raise NodeError("INVALID_ARGUMENT", f"unknown strategy {strategy!r}") from None
        sid = f"{self.id}-{uuid.uuid4().hex[:8]}"
        missing = self._missing_streams(analysis)
        if missing and not wait_for_streams:
            raise NodeError("NOT_FOUND", f'unknown stream "{missing[0]}": no super-peer has it registered')
        runtime = SubscriptionRuntime(sid, analysis, self.retention)
        record = SubscriptionRecord(runtime, None, {}, strat, tuple(missing))
        runtime.start()
        with self.lock:
            self.subscriptions[sid] = record
        if not missing:
            try:
                self._activate(record)
            except NodeError:
                with self.lock:
                    self.subscriptions.pop(sid, None)
                runtime.stop()
                raise
        return record

    def _missing_streams(self, analysis) -> list[str]:
        return sorted({i.input.stream for i in analysis.properties.inputs
                       if i.input.stream not in self.known_originals})

    def ready_waiting(self, older_than: float | None = None) -> list[SubscriptionRecord]:
        """Waiting subscriptions whose streams are now all registered, oldest first."""
        with self.lock:
            ready = [r for r in self.subscriptions.values()
                     if r.plan is None and not r.error and r.waiting_for
                     and not self._missing_streams(r.runtime.analysis)
                     and (older_than is None or r.registered_at < older_than)]
        return sorted(ready, key=lambda r: r.registered_at)

    def activate(self, sid: str) -> tuple[bool, str]:
        """Plan and install one waiting subscription (once; later calls do nothing)."""
        with self.lock:
            record = self.subscriptions.get(sid)
            if record is None or record.plan is not None or record.error or not record.waiting_for:
                return False, "not waiting"
            if self._missing_streams(record.runtime.analysis):
                return False, "still waiting for a stream"
            record.waiting_for = ()
        try:
            self._activate(record)
            return True, ""
        except NodeError as exc:
            record.error = f"{exc.code}: {exc.message}"
            record.runtime.buffer.close(record.error)
            return False, record.error

    def _activate(self, record: SubscriptionRecord) -> None:
        sid, analysis = record.runtime.id, record.runtime.analysis
        last_reason = ""
        for _ in range(REPLANS):
            view = PlanningView(self)
            try:
                plan = Planner(view, table=view).subscribe(sid, analysis.properties, self.id,
                                                           record.strategy)
            except RegistrationError as exc:
                raise NodeError("NOT_FOUND", str(exc)) from None
            except KeyError as exc:
                raise NodeError("NOT_FOUND", str(exc).strip("'\"")) from None
            if not plan.admitted:
                raise NodeError("RESOURCE_EXHAUSTED", f"subscription {plan.reason}")
            ok, last_reason = self._install(plan, view)
            if ok:
                break
        else:
            raise NodeError("ABORTED", f"could not reserve the plan's resources: {last_reason}")
        inputs = {p.input_properties.variable: p.result_stream for p in plan.parts}
        with self.lock:
            record.plan = plan
            record.inputs = inputs
            for variable, stream in inputs.items():
                self.deliveries.setdefault(stream, []).append((record.runtime, variable))
        # a stream that has already ended delivers nothing more: the subscription ends now
        for p in plan.parts:
            if view.statistics.closed.get(p.input_properties.input.stream):
                record.runtime.feed(p.input_properties.variable, [], end=True)

    def _install(self, plan: Plan, view: "PlanningView") -> tuple[bool, str]:
        """Reserve on every affected peer, then commit everywhere (abort on any refusal)."""
        txn = uuid.uuid4().hex
        new_streams = [s for p in plan.parts for s in p.new_streams]
        affected = sorted({self.id} | {p for s in new_streams for p in s.route})
        part = json.dumps({"streams": [stream_to_json(s) for s in new_streams],
                           "subscription": plan.subscription, "target": plan.target})
        reserved = []
        for peer in affected:
            ok, reason = self._call(peer, "Reserve", pb.ReserveRequest(transaction=txn, part_json=part),
                                    lambda r: (r.ok, r.reason))
            if not ok:
                for p in reserved:
                    self._call(p, "Abort", pb.AbortRequest(transaction=txn), lambda r: None,
                               required=False)
                return False, f"{peer}: {reason}"
            reserved.append(peer)
        lineage = sorted({sid for p in plan.parts for sid in self._lineage(view, p.reused)})
        commit = json.dumps({"subscription": plan.subscription, "lineage": lineage})
        for peer in self.backbone.peers:
            self._call(peer, "Commit", pb.CommitRequest(transaction=txn, commit_json=commit),
                       lambda r: None, required=peer in affected)
        return True, ""

    def _lineage(self, view: "PlanningView", sid: str) -> list[str]:
        """A reused stream and its ancestors up to the original: a stream's parent is always
        present at the stream's origin peer, so each step is one table look-up there."""
        out = []
        current = view.streams.get(sid)
        while current is not None:
            out.append(current.id)
            if current.parent is None:
                break
            parent = view.streams.get(current.parent)
            if parent is None:
                view.streams_at(current.origin, current.input)
                parent = view.streams.get(current.parent)
            current = parent
        return out

    def unsubscribe(self, sid: str) -> list[str]:
        with self.lock:
            record = self.subscriptions.pop(sid, None)
            if record is None:
                raise NodeError("NOT_FOUND", f"no subscription {sid} at {self.id}")
            for stream in record.inputs.values():
                self.deliveries[stream] = [(r, v) for r, v in self.deliveries.get(stream, ())
                                           if r is not record.runtime]
            record.runtime.stop()
        removed: list[str] = []
        for peer in self.backbone.peers:
            got = self._call(peer, "Remove", pb.RemoveRequest(subscription=sid),
                             lambda r: list(r.removed), required=False)
            removed.extend(got or [])
        return sorted(set(removed))

    def read_results(self, sid: str, offset: int, max_items: int, wait_s: float):
        record = self.subscriptions.get(sid)
        if record is None:
            raise NodeError("NOT_FOUND", f"no subscription {sid} at {self.id} (unsubscribed, or "
                                         "registered at another super-peer)")
        return record.runtime.buffer, record.runtime.buffer.read(offset, max_items or 1000, wait_s)

    # ================================================================== super-peer RPC handlers

    def local_streams(self, input_stream: InputStream) -> list[NetworkStream]:
        with self.lock:
            return [s for s in self.entries.values() if s.input == input_stream]

    def lookup(self, input_json: str) -> tuple[str, str]:
        inp = input_from_json(json.loads(input_json))
        streams = self.local_streams(inp)
        return json.dumps([stream_to_json(s) for s in streams]), json.dumps(self.own_usage())

    def statistics_json(self, name: str) -> str:
        state = self.originals.get(name)
        if state is None:
            raise NodeError("NOT_FOUND", f'stream "{name}" is not registered at {self.id}')
        with self.lock:
            return json.dumps({**statistics_to_json(state.statistics), "closed": state.closed})

    def announce(self, stream_json: str) -> str:
        """Learn a newly registered stream; answer which waiting subscriptions are now ready."""
        s = stream_from_json(json.loads(stream_json))
        with self.lock:
            self.known_originals.setdefault(s.id, s)
            if self.id in s.route:
                self.entries.setdefault(s.id, s)
        return json.dumps([{"subscription": r.runtime.id, "registered_at": r.registered_at}
                           for r in self.ready_waiting()])

    def reserve(self, txn: str, part_json: str) -> tuple[bool, str]:
        part = json.loads(part_json)
        streams = [stream_from_json(j) for j in part["streams"]]
        with self.lock:
            load, links = self._usage_with_pending()
            capacity = self.backbone.peers[self.id].load_capacity
            add = sum(s.usage.peers.get(self.id, 0.0) for s in streams)
            if load + add > capacity * (1 + 1e-9):
                return False, (f"{self.id} would need {100 * (load + add) / capacity:.1f}% of its "
                               "load capacity")
            for s in streams:
                for n in s.next_hops(self.id):
                    key = frozenset((self.id, n))
                    bw = self.backbone.links[key].bandwidth
                    used = links.get(n, 0.0) + self._reported_link(n) + s.estimate.bits_per_second
                    if used > bw * (1 + 1e-9):
                        return False, f"link {self.id}–{n} would need {100 * used / bw:.1f}% of its bandwidth"
            self.pending[txn] = streams
        return True, ""

    def commit(self, txn: str, commit_json: str) -> None:
        info = json.loads(commit_json)
        with self.lock:
            streams = self.pending.pop(txn, [])
            for s in streams:
                s.users.add(info["subscription"])
                if self.id in s.route:
                    self.entries[s.id] = s
                if s.origin == self.id and s.parent is not None:
                    self.children.setdefault(s.parent, []).append(s.id)
                    parent = self.entries.get(s.parent)
                    self.executor.install(s.id, s.operators, s.parent,
                                          parent.kind if parent is not None else "items")
            # the reused streams and their ancestors present here gain the subscription as a user
            for sid in info["lineage"]:
                entry = self.entries.get(sid)
                if entry is not None:
                    entry.users.add(info["subscription"])

    def abort(self, txn: str) -> None:
        with self.lock:
            self.pending.pop(txn, None)

    def _unneeded_tail(self, s: NetworkStream) -> bool:
        """This peer ends the stream's route and nothing here takes the stream any more."""
        return (not s.original and len(s.route) > 1 and s.route[-1] == self.id and s.origin != self.id
                and not self.children.get(s.id) and not self.deliveries.get(s.id))

    def cut_tails(self) -> None:
        """Tell the route of every stream this peer no longer needs to end one peer earlier."""
        with self.lock:
            tails = [s for s in self.entries.values() if self._unneeded_tail(s)]
        for s in tails:
            previous = s.route[-2]
            for peer in dict.fromkeys(s.route):
                self._call(peer, "Truncate", pb.TruncateRequest(stream=s.id, peer=previous),
                           lambda r: None, required=False)

    def truncate(self, stream: str, peer: str) -> None:
        with self.lock:
            s = self.entries.get(stream)
            if s is None or peer not in s.route:
                return
            route = s.route[: s.route.index(peer) + 1]
            if self.id not in route:
                del self.entries[stream]
                self.children.pop(stream, None)
                return
            s.route = route
            again = self._unneeded_tail(s)
        if again:
            self.cut_tails()

    def remove(self, sid: str) -> list[str]:
        removed = []
        with self.lock:
            for s in list(self.entries.values()):
                if sid in s.users:
                    s.users.discard(sid)
                    if not s.users and not s.original:
                        removed.append(s.id)
                        del self.entries[s.id]
                        self.executor.remove(s.id)
                        if s.parent in self.children:
                            self.children[s.parent] = [c for c in self.children[s.parent] if c != s.id]
        threading.Thread(target=self.cut_tails, daemon=True).start()
        return removed

    # ================================================================== usage

    def own_usage(self) -> dict:
        """This peer's load (cores) and the bandwidth it sends on each of its links (bit/s)."""
        with self.lock:
            load = sum(s.usage.peers.get(self.id, 0.0) for s in self.entries.values())
            links: dict[str, float] = {}
            for s in self.entries.values():
                for n in s.next_hops(self.id):
                    links[n] = links.get(n, 0.0) + s.estimate.bits_per_second
            return {"peer": self.id, "load": load, "links": links}

    def _usage_with_pending(self) -> tuple[float, dict[str, float]]:
        own = self.own_usage()
        load, links = own["load"], dict(own["links"])
        for streams in self.pending.values():
            for s in streams:
                load += s.usage.peers.get(self.id, 0.0)
                for n in s.next_hops(self.id):
                    links[n] = links.get(n, 0.0) + s.estimate.bits_per_second
        return load, links

    def _reported_link(self, neighbour: str) -> float:
        """Bandwidth the neighbour reported sending towards this peer (links are shared)."""
        return self.peer_usage.get(neighbour, {}).get("links", {}).get(self.id, 0.0)

    def usage_view(self) -> tuple[dict[frozenset[str], float], dict[str, float]]:
        reports = dict(self.peer_usage)
        reports[self.id] = self.own_usage()
        link_used: dict[frozenset[str], float] = {}
        peer_used: dict[str, float] = {}
        for peer, report in reports.items():
            peer_used[peer] = report.get("load", 0.0)
            for n, bits in report.get("links", {}).items():
                key = frozenset((peer, n))
                link_used[key] = link_used.get(key, 0.0) + bits
        return link_used, peer_used

    # ================================================================== peers

    def _call(self, peer: str, method: str, request, handle: Callable, required: bool = True):
        """An RPC to a peer (or to ourselves without the network)."""
        if peer == self.id:
            return handle(_LOCAL[method](self, request))
        try:
            if self._stop.is_set():
                raise _Stopped()
            reply = getattr(self.stub(peer), method)(request, timeout=10)
            self.unreachable.pop(peer, None)
            return handle(reply)
        except (grpc.RpcError, _Stopped, ValueError) as exc:
            # ValueError: the channel was closed because this node is stopping
            code = exc.code() if isinstance(exc, grpc.RpcError) else None
            self.unreachable[peer] = (f"{code.name}: {exc.details()}" if code is not None  # type: ignore[union-attr]
                                      else "this super-peer is stopping")
            if required:
                if method == "Reserve":
                    return (False, f"{peer} is unreachable ({self.unreachable[peer]})")
                raise NodeError("UNAVAILABLE", f"super-peer {peer} is unreachable: "
                                               f"{self.unreachable[peer]}") from None
            return None

    def _broadcast(self, method: str, request) -> None:
        def send() -> None:
            for peer in self.backbone.peers:
                if peer != self.id:
                    self._call(peer, method, request, lambda r: None, required=False)
        threading.Thread(target=send, daemon=True).start()

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(1.0):
            self.heartbeat_once()

    def heartbeat_once(self) -> None:
        for peer in self.backbone.peers:
            if peer == self.id or self._stop.is_set():
                continue
            try:
                reply = self.stub(peer).Heartbeat(pb.HeartbeatRequest(sender=self.id), timeout=1.0)
            except grpc.RpcError as exc:
                self.unreachable[peer] = f"{exc.code().name}: {exc.details()}"
                continue
            except ValueError:  # channel closed: stopping
                return
            self.unreachable.pop(peer, None)
            self.alive[peer] = time.time()
            if reply.usage_json:
                self.peer_usage[peer] = json.loads(reply.usage_json)
            if reply.originals_json:
                for j in json.loads(reply.originals_json):
                    s = stream_from_json(j)
                    with self.lock:
                        self.known_originals.setdefault(s.id, s)
        # a subscription whose announcement was missed (its peer was down) is installed late
        for record in self.ready_waiting(older_than=time.time() - 3.0):
            self.activate(record.runtime.id)

    def heartbeat_reply(self) -> tuple[str, str]:
        with self.lock:
            originals = [stream_to_json(self.entries[n]) for n in self.originals if n in self.entries]
        return json.dumps(self.own_usage()), json.dumps(originals)

    # ================================================================== status

    def status(self) -> dict:
        with self.lock:
            return {
                "superpeer": self.id,
                "address": self.topology.address(self.id),
                "streams_registered_here": {
                    n: {"root": s.root, "item": s.item, "accepted": s.accepted,
                        "rejected": s.rejected, "closed": s.closed,
                        "statistics": {"items_observed": s.statistics.items,
                                       "avg_item_size": round(s.statistics.avg_item_size, 1),
                                       "frequency": round(s.statistics.frequency, 3)}}
                    for n, s in self.originals.items()},
                "stream_table": [{**_stream_status(s, self.id),
                                  "derived_here": list(self.children.get(s.id, ()))}
                                 for s in self.entries.values()],
                "operators": [{"stream": sid, "parent": self.entries[sid].parent,
                               "operators": [str(o) for o in self.entries[sid].operators] or ["forward"]}
                              for sid in self.executor.installed() if sid in self.entries],
                "executor": self.executor.name,
                "executor_status": self.executor.status(),
                "subscriptions": {sid: {"inputs": r.inputs,
                                        "plan": r.plan.to_json() if r.plan else None,
                                        "waiting_for": list(r.waiting_for), "plan_error": r.error,
                                        "results": r.runtime.buffer.base + len(r.runtime.buffer.items),
                                        "closed": r.runtime.buffer.closed,
                                        "error": r.runtime.buffer.error}
                                  for sid, r in self.subscriptions.items()},
                "links": {f"{self.id}->{n}": {"items": c.items, "bytes": c.bytes, "batches": c.batches,
                                              "errors": c.errors, "last_error": c.last_error,
                                              "dropped": c.dropped}
                          for n, c in self.link_counters.items()},
                "load": self.own_usage(),
                "process_cpu_seconds": time.process_time(),
                "unreachable_peers": dict(self.unreachable),
                "peers_last_heard_s_ago": {p: round(time.time() - t, 1) for p, t in self.alive.items()},
                "dropped_transfers_for_unknown_streams": self.unknown_transfers,
                "dropped_malformed_transfers": self.bad_transfers,
                "last_malformed_transfer": self.last_bad_transfer,
            }


def _stream_status(s: NetworkStream, here: str) -> dict:
    return {"id": s.id, "input": s.input.stream, "original": s.original, "kind": s.kind,
            "origin": s.origin, "parent": s.parent, "route": list(s.route),
            "next_hops": s.next_hops(here),
            "operators": [str(o) for o in s.operators],
            "selection": [str(a) for a in s.properties.selection.atoms] if s.properties.selection else [],
            "window": str(s.properties.window) if s.properties.window else None,
            "users": sorted(s.users)}


_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)

_LOCAL: dict[str, Callable] = {
    "Reserve": lambda n, r: pb.ReserveReply(**dict(zip(("ok", "reason"), n.reserve(r.transaction, r.part_json)))),
    "Commit": lambda n, r: (n.commit(r.transaction, r.commit_json), pb.CommitReply())[1],
    "Abort": lambda n, r: (n.abort(r.transaction), pb.AbortReply())[1],
    "Remove": lambda n, r: pb.RemoveReply(removed=n.remove(r.subscription)),
    "AnnounceStream": lambda n, r: pb.AnnounceStreamReply(waiting_json=n.announce(r.stream_json)),
    "Truncate": lambda n, r: (n.truncate(r.stream, r.peer), pb.TruncateReply())[1],
    "Activate": lambda n, r: pb.ActivateReply(**dict(zip(("ok", "reason"), n.activate(r.subscription)))),
}


class PlanningView:
    """What the planner needs, for a plan computed at one super-peer: the backbone, the tables of
    visited peers (asked over gRPC), the last known usage of every peer and link, and fresh
    statistics of the original streams from the peers they are registered at."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.backbone = node.backbone
        self.link_used, self.peer_used = node.usage_view()
        self.streams: dict[str, NetworkStream] = {}
        self.statistics = _StatisticsCache(node)

    def original(self, input_stream: InputStream) -> NetworkStream:
        s = self.node.known_originals.get(input_stream.stream)
        if s is None:
            raise KeyError(f'unknown stream "{input_stream.stream}": no super-peer has it registered')
        if s.input != input_stream:
            raise KeyError(f'stream "{input_stream.stream}" has items '
                           f'{"/".join(s.input.items)}, not {"/".join(input_stream.items)}')
        s = stream_from_json(stream_to_json(s))
        stats = self.statistics[s.id]
        s.estimate = StreamEstimate(stats.frequency, stats.avg_item_size)
        self.streams[s.id] = s
        return s

    def new_stream_id(self) -> str:
        return self.node.new_stream_id()

    def streams_at(self, peer: str, input_stream: InputStream) -> list[NetworkStream]:
        if peer == self.node.id:
            found = [stream_from_json(stream_to_json(s)) for s in self.node.local_streams(input_stream)]
        else:
            reply = self.node._call(peer, "LookupStreams",
                                    pb.LookupStreamsRequest(input_json=json.dumps(
                                        {"stream": input_stream.stream, "items": list(input_stream.items)})),
                                    lambda r: r, required=False)
            if reply is None:
                return []  # an unreachable peer offers nothing to reuse
            found = [stream_from_json(j) for j in json.loads(reply.streams_json)]
            report = json.loads(reply.usage_json)
            self.node.peer_usage[peer] = report
        for s in found:
            self.streams.setdefault(s.id, s)
        return [self.streams[s.id] for s in found]


class _StatisticsCache(dict):
    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node = node
        self.closed: dict[str, bool] = {}

    def __missing__(self, name: str) -> StreamStatistics:
        original = self.node.known_originals.get(name)
        if original is None:
            raise KeyError(f'unknown stream "{name}"')
        if original.origin == self.node.id:
            data = json.loads(self.node.statistics_json(name))
        else:
            reply = self.node._call(original.origin, "GetStatistics",
                                    pb.GetStatisticsRequest(stream=name), lambda r: r)
            data = json.loads(reply.json)
        self.closed[name] = bool(data.get("closed"))
        stats = statistics_from_json(data)
        if stats.frequency <= 0:
            stats.frequency = 1.0  # nothing observed yet: assume a slow stream
        self[name] = stats
        return stats

    def get(self, name, default=None):  # type: ignore[override]
        try:
            return self[name]
        except KeyError:
            return default
