"""The control plane of one super-peer: registration of streams and subscriptions, and the
two-phase coordinator that installs a plan (DESIGN.md §5).

* A publisher registers a stream here: every peer learns it (``announce``) and answers with the
  subscriptions that were waiting for it, which are then planned and installed in the order they
  were registered — so later ones can reuse earlier ones' streams and all see the first item.
* A subscription registered here is planned by the shared planner over a ``RemotePlanningView``
  fetched beforehand, then installed in two phases: reserve on every peer the new streams pass
  (and this one), then commit on the peers the plan touches — those reserved, and those holding
  a reused stream or one of its ancestors, which gain the subscription as a user. Any refusal
  aborts the reserved peers and the subscription is planned again (``REPLANS`` times).
* Unsubscribe stops post-processing here and asks every peer to release what nothing uses.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from sharing.analysis import analyze
from sharing.matching import raw_properties
from sharing.planner import Plan, Planner, RegistrationError, Strategy
from sharing.properties import InputStream
from sharing.statistics import StreamEstimate, StreamStatistics
from sharing.stream_table import NetworkStream
from wxquery.errors import WXQueryError

from .errors import NodeError
from .peer_channels import PeerLink, Waiting
from .peer_state import OriginalState, PeerState
from .remote_view import RemotePlanningView, fetch_planning_view
from .subscriptions import ResultBuffer, SubscriptionRuntime

REPLANS = 3
ANNOUNCE_TIMEOUT_S = 30


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


class ControlPlane:
    def __init__(self, state: PeerState, link: PeerLink, retention: int,
                 planner: Callable[[RemotePlanningView], Planner] | None = None) -> None:
        self.state = state
        self.link = link
        self.retention = retention
        self.make_planner = planner or (lambda view: Planner(view.snapshot))
        self.subscriptions: dict[str, SubscriptionRecord] = {}
        self._ids = itertools.count(1)

    def new_stream_id(self) -> str:
        return f"{self.state.id}.{next(self._ids)}"

    # ------------------------------------------------------------------ publishers

    def register_stream(self, name: str, root: str, item: str, rate: float) -> None:
        if not name or not root or not item:
            raise NodeError("INVALID_ARGUMENT", "a stream needs a name, a root element and an item element")
        here = self.state.id
        with self.state.lock:
            known = self.state.known_originals.get(name)
            if known is not None and known.origin != here:
                raise NodeError("ALREADY_EXISTS", f'stream "{name}" is already registered at '
                                                  f'{known.origin} ({"/".join(known.input.items)})')
            existing = self.state.originals.get(name)
            if existing is not None:
                if (existing.root, existing.item) != (root, item):
                    raise NodeError("ALREADY_EXISTS", registered_differently(existing, root, item))
                if existing.closed:
                    raise NodeError("FAILED_PRECONDITION", f'stream "{name}" was closed; register it under a new name')
                return  # a publisher reconnecting
            inp = InputStream(name, (root, item))
            self.state.originals[name] = OriginalState(
                name, root, item, statistics=StreamStatistics(frequency=rate), rate=rate)
            stream = NetworkStream(id=name, input=inp, properties=raw_properties(inp), kind="items",
                                   origin=here, parent=None, operators=(), route=(here,),
                                   estimate=StreamEstimate(rate, 0.0), original=True)
            self.state.table.add(stream)
            self.state.known_originals[name] = stream
        # Synchronously, before the publisher gets the reply: every super-peer reports the
        # subscriptions waiting for this stream, and they are planned and installed one after
        # the other in the order they were registered (so later ones can reuse earlier ones'
        # streams) — all of them see the stream from its first item.
        waiting: list[tuple[float, str, str]] = []

        def announce(peer: str) -> None:
            for w in self.link.announce(peer, stream) or []:
                waiting.append((w.registered_at, peer, w.subscription))

        threads = [threading.Thread(target=announce, args=(peer,), daemon=True)
                   for peer in self.state.backbone.peers if peer != here]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=ANNOUNCE_TIMEOUT_S)
        waiting.extend((r.registered_at, here, r.runtime.id) for r in self.ready_waiting())
        for _, peer, sid in sorted(waiting):
            self.link.activate(peer, sid)

    def announce(self, stream: NetworkStream) -> list[Waiting]:
        """Learn a newly registered stream; answer which waiting subscriptions are now ready."""
        with self.state.lock:
            self.state.known_originals.setdefault(stream.id, stream)
            if self.state.id in stream.route and stream.id not in self.state.table:
                self.state.table.add(stream)
        return [Waiting(r.runtime.id, r.registered_at) for r in self.ready_waiting()]

    # ------------------------------------------------------------------ subscriptions

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
        sid = f"{self.state.id}-{uuid.uuid4().hex[:8]}"
        missing = self.state.missing_streams(analysis)
        if missing and not wait_for_streams:
            raise NodeError("NOT_FOUND", f'unknown stream "{missing[0]}": no super-peer has it registered')
        runtime = SubscriptionRuntime(sid, analysis, self.retention, self.state.limits)
        record = SubscriptionRecord(runtime, None, {}, strat, tuple(missing))
        runtime.start()
        with self.state.lock:
            self.subscriptions[sid] = record
        if not missing:
            try:
                self._activate(record)
            except NodeError:
                with self.state.lock:
                    self.subscriptions.pop(sid, None)
                runtime.stop()
                raise
        return record

    def ready_waiting(self, older_than: float | None = None) -> list[SubscriptionRecord]:
        """Waiting subscriptions whose streams are now all registered, oldest first."""
        with self.state.lock:
            ready = [r for r in self.subscriptions.values()
                     if r.plan is None and not r.error and r.waiting_for
                     and not self.state.missing_streams(r.runtime.analysis)
                     and (older_than is None or r.registered_at < older_than)]
        return sorted(ready, key=lambda r: r.registered_at)

    def activate(self, sid: str) -> tuple[bool, str]:
        """Plan and install one waiting subscription (once; later calls do nothing)."""
        with self.state.lock:
            record = self.subscriptions.get(sid)
            if record is None or record.plan is not None or record.error or not record.waiting_for:
                return False, "not waiting"
            if self.state.missing_streams(record.runtime.analysis):
                return False, "still waiting for a stream"
            record.waiting_for = ()
        try:
            self._activate(record)
            return True, ""
        except NodeError as exc:
            record.error = f"{exc.code}: {exc.message}"
            record.runtime.buffer.close(exc.message, exc.code)
            return False, record.error

    def _activate(self, record: SubscriptionRecord) -> None:
        sid, analysis = record.runtime.id, record.runtime.analysis
        self.state.check_shapes(analysis)
        last_reason = ""
        for _ in range(REPLANS):
            view = fetch_planning_view(self.state, self.link, analysis.properties, self.new_stream_id)
            try:
                plan = self.make_planner(view).subscribe(sid, analysis.properties, self.state.id,
                                                         record.strategy)
            except RegistrationError as exc:
                raise NodeError("NOT_FOUND", str(exc)) from None
            except KeyError as exc:
                raise NodeError("NOT_FOUND", str(exc).strip("'\"")) from None
            if not plan.admitted:
                raise NodeError("RESOURCE_EXHAUSTED", f"subscription {plan.reason}")
            ok, last_reason = self.install(plan, view)
            if ok:
                break
        else:
            raise NodeError("ABORTED", f"could not reserve the plan's resources: {last_reason}")
        inputs = {p.input_properties.variable: p.result_stream for p in plan.parts}
        with self.state.lock:
            record.plan = plan
            record.inputs = inputs
            for variable, stream in inputs.items():
                self.state.deliveries.setdefault(stream, []).append((record.runtime, variable))
        # a stream that has already ended delivers nothing more: the subscription ends now
        for p in plan.parts:
            if view.closed.get(p.input_properties.input.stream):
                record.runtime.feed(p.input_properties.variable, [], end=True)

    def install(self, plan: Plan, view: RemotePlanningView) -> tuple[bool, str]:
        """Reserve on every peer the new streams pass (and here), then commit on the peers the
        plan touches; on a refusal abort what was reserved and say why."""
        txn = uuid.uuid4().hex
        new_streams = [s for p in plan.parts for s in p.new_streams]
        affected = sorted({self.state.id} | {p for s in new_streams for p in s.route})
        reserved = []
        for peer in affected:
            ok, reason = self.link.reserve(peer, txn, new_streams, plan.subscription, plan.target)
            if not ok:
                for p in reserved:
                    self.link.abort(p, txn)
                return False, f"{peer}: {reason}"
            reserved.append(peer)
        lineage = sorted({s.id for p in plan.parts for s in view.lineage(p.reused)})
        for peer in self.commit_peers(affected, lineage, view):
            self.link.commit(peer, txn, plan.subscription, lineage, required=peer in affected)
        return True, ""

    def commit_peers(self, affected: list[str], lineage: list[str],
                     view: RemotePlanningView) -> list[str]:
        """The peers a plan touches, in backbone order: those that reserved new streams and
        those holding a reused stream or an ancestor of it (they count the new user)."""
        touched = set(affected) | view.peers_holding(lineage)
        return [p for p in self.state.backbone.peers if p in touched]

    def unsubscribe(self, sid: str) -> list[str]:
        with self.state.lock:
            record = self.subscriptions.pop(sid, None)
            if record is None:
                raise NodeError("NOT_FOUND", f"no subscription {sid} at {self.state.id}")
            for stream in record.inputs.values():
                self.state.deliveries[stream] = [(r, v) for r, v in self.state.deliveries.get(stream, ())
                                                 if r is not record.runtime]
            record.runtime.stop()
        removed: list[str] = []
        for peer in self.state.backbone.peers:
            removed.extend(self.link.remove(peer, sid) or [])
        return sorted(set(removed))

    def read_results(self, sid: str, offset: int, max_items: int, wait_s: float
                     ) -> tuple[ResultBuffer, tuple[int, list[str], bool, int]]:
        record = self.subscriptions.get(sid)
        if record is None:
            raise NodeError("NOT_FOUND", f"no subscription {sid} at {self.state.id} (unsubscribed, or "
                                         "registered at another super-peer)")
        return record.runtime.buffer, record.runtime.buffer.read(offset, max_items or 1000, wait_s)

    def status(self) -> dict:
        return {sid: {"inputs": r.inputs,
                      "plan": r.plan.to_json() if r.plan else None,
                      "waiting_for": list(r.waiting_for), "plan_error": r.error,
                      **r.runtime.buffer.status()}
                for sid, r in self.subscriptions.items()}

    def stop(self) -> None:
        for record in self.subscriptions.values():
            record.runtime.stop()


def registered_differently(existing: OriginalState, root: str, item: str) -> str:
    """A second registration of a name must describe the same stream: say what differs."""
    return (f'stream "{existing.name}" is already registered here as <{existing.root}> with '
            f'<{existing.item}> items, not <{root}> with <{item}> items: register the other '
            f'stream under a new name')
