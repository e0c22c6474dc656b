"""The control plane of one super-peer: registration of streams and subscriptions (DESIGN.md
§5). Plans are made here and installed by the two-phase coordinator (``two_phase``); what a
peer does when a plan is installed on it is the ``participant``'s.

* A publisher registers a stream here: its catalogue homes and the peers whose subscriptions wait
  for it learn it (``announce``; the others by gossip) and answer with the waiting ones, installed
  in the order they were registered — later ones reuse earlier ones' streams; all see the first item.
* A subscription registered here is planned by the shared planner over a ``RemotePlanningView``
  fetched beforehand (whose usage counts what in-flight installations hold reserved), then
  installed in two phases (``two_phase.Coordinator``): reserve on every peer the new streams pass (and this one), then
  commit on the peers the plan touches — those reserved, and those holding a reused stream or
  one of its ancestors, which gain the subscription as a user. Any refusal aborts the reserved
  peers and the subscription is planned again over a fresh view after a short random pause.
* Concurrent registrations behave as if they came one after the other: this peer installs one
  subscription at a time, and a peer refuses, as a *conflict*, a reservation for a plan made
  over an older version of it or while another installation of the same stream is in flight
  there — the later plan is made again once the earlier one is in place, and reuses its streams
  rather than duplicating them. Conflicts, and plans rejected that would fit once in-flight
  installations settle (``in_flight``), are retried until ``INSTALL_DEADLINE_S``; refusals for capacity ``REPLANS`` times.
* End of stream, whatever the interleaving with a close: the subscription takes its inputs here
  *before* any commit, and peers commit downstream first (by distance to this peer), so no item
  or end of a new stream can pass a peer that has not installed it yet; a peer that installs a
  stream whose parent already ended there ends it at once (``DataPlane.attach``), and a delivery
  taken from a stream that already ended here is ended when it is taken. A failed commit, or
  any unexpected error, removes what was installed and ends the subscription with the reason.
* Unsubscribe stops post-processing here and asks the peers its plans were committed at to release what nothing uses.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable

from sharing.analysis import analyze
from sharing.backbone import TopologyError
from sharing.estimates import samplable
from sharing.planner import Plan, Planner, RegistrationError, Strategy
from sharing.subnets import Subnets
from sharing.widening import in_place
from sharing.replay import replay_inputs
from sharing.replay_plans import shared_replays
from sharing.statistics import StreamStatistics
from sharing.stream_table import NetworkStream
from wxquery.errors import WXQueryError
from wxquery.limits import DEFAULT_LIMITS, AnalysisInterrupted, Interruption, QueryLimits

from ..data.event_time import EventTime
from ..data.positions import StreamPositions
from ..errors import NodeError, as_node_error
from ..peer_state import OriginalState, PeerState
from ..recovery.route_health import data_paths
from .peer_link import PeerLink, Reserved, Waiting
from ..subscriptions.approximation import CONFIDENCE, beyond_bound, check_bounds
from ..subscriptions.record import SubscriptionRecord, past_of, past_progress
from ..subscriptions.results import ResultBuffer, subscription_buffer
from ..subscriptions.runtime import SubscriptionRuntime
from .announcements import announce_to, everyone_else, homes, missing_streams
from .participant import CONFLICT
from .remote_view import RemotePlanningView, fetch_planning_view, planner_for, remember_reach, settled_view
from ..subscriptions.step_times import StepTimes
from .stream_names import check_registration
from .two_phase import Coordinator, PlanAgain
from .plan_inputs import take_inputs
from .widening_in_place import widen_plan

REPLANS = 3  # refusals for capacity before a subscription is given up (ABORTED)
GONE = "the client gave up on the registration (cancelled, or its deadline passed): nothing is kept"
INSTALL_DEADLINE_S = 20.0  # conflicts with concurrent installations are retried this long
REPLAN_PAUSE_S = (0.01, 0.5)  # random pause before planning again: doubling from, at most
STREAM_ID_BLOCK = 1000  # stream numbers reserved in the state store at a time
ANALYSIS_DEADLINE_S = 10.0  # the longest a query's analysis may take, whatever the client allows
# A waiting subscription is activated by its own peer (``activate_late``) only this long after a
# heartbeat told of its stream: the stream's peer's announcement activates it, in order, before.
LATE_ACTIVATION_S = 3.0
# A subscription the registering peer said it would activate (in registration order, so that
# later ones reuse earlier ones' streams) is activated here only if that has not happened by then.
ORDERED_ACTIVATION_S = 60.0

log = logging.getLogger("streamglobe.superpeer")


class ControlPlane:
    # What one subscription's query may hold and cost; set on an instance to configure.
    query_limits: QueryLimits = DEFAULT_LIMITS
    analysis_deadline_s: float = ANALYSIS_DEADLINE_S

    def __init__(self, state: PeerState, link: PeerLink, retention: int, positions: StreamPositions,
                 incarnation: Callable[[str], str],
                 planner: Callable[[RemotePlanningView], Planner] | None = None) -> None:
        """``retention``: result items a subscription's buffer keeps; ``positions``: the data
        plane's item numbers (exact starts); ``incarnation``: the process a peer answers with
        (the failure detector's; a change means it restarted)."""
        self.state = state
        self.link = link
        self.two_phase = Coordinator(state, link)  # installs plans: reserve, commit, release
        self.retention = retention
        self.widening = False  # offer to widen a running stream for a near miss (``serve --widening``)
        self.widen_in_place = False  # … in place (``widening_in_place``), not by a stream beside it
        self.subnets: Subnets | None = None  # the topology's: each planned on its own (``planner_for``)
        self.make_planner = planner or (lambda view: planner_for(view, self.subnets, self.widening))
        self.incarnation = incarnation
        self.positions = positions
        self.subscriptions: dict[str, SubscriptionRecord] = {}
        self._ids = iter(())  # stream numbers, reserved in blocks (``new_stream_id``)
        self._installing = threading.Lock()  # one installation at a time from this peer
        self.announced: dict[str, float] = {}  # waiting subscriptions the stream's peer activates, when told
        self.replanned: Callable[[str], None] = lambda why: None  # what can change best plans here
        self.waiters, self.waiting_changed = everyone_else(state), (lambda: None)  # (the Node wires gossip's)

    def new_stream_id(self) -> str:
        number = next(self._ids, None)
        if number is None:
            first = self.state.store.reserve_ids(STREAM_ID_BLOCK)
            self._ids = iter(range(first, first + STREAM_ID_BLOCK))
            number = next(self._ids)
        return f"{self.state.id}.{number}"

    # ------------------------------------------------------------------ publishers

    def register_stream(self, name: str, root: str, item: str, rate: float, event_time: str = "",
                        event_time_rate: float = 1.0, publisher: str = "") -> None:
        """``event_time``: the item's element time windows read, advanced by watermarks at
        ``event_time_rate`` units per second while the stream is idle (``event_time``)."""
        check_registration(name, root, item, event_time, event_time_rate)
        here = self.state.id
        with self.state.lock:
            taken = self.state.table.get(name)
            if taken is not None and not taken.original:
                raise NodeError("ALREADY_EXISTS", f"{name!r} names a stream of the network already")
            known = self.state.known_originals.get(name)
            if known is not None and known.origin != here:
                raise NodeError("ALREADY_EXISTS", f'stream "{name}" is already registered at '
                                                  f'{known.origin} ({"/".join(known.input.items)})')
            existing = self.state.originals.get(name)
            if existing is not None:
                if (existing.root, existing.item) != (root, item):
                    raise NodeError("ALREADY_EXISTS", f'stream "{name}" is already registered here as <{existing.root}> with '
                                                      f'<{existing.item}> items, not <{root}> with <{item}> items: register '
                                                      'the other stream under a new name')
                if existing.closed:
                    raise NodeError("FAILED_PRECONDITION", f'stream "{name}" was closed; register it under a new name')
                return  # a publisher reconnecting
            try:
                self.state.store.add_original(name, root, item, rate, time.time(), event_time,
                                              event_time_rate, publisher)
            except Exception as exc:  # noqa: BLE001 - refused with the reason, nothing half-done
                raise NodeError("UNAVAILABLE", f'could not record stream "{name}": {exc}') from None
            stream = self.state.add_original(OriginalState(
                name, root, item, statistics=StreamStatistics(frequency=rate), rate=rate,
                event_time=EventTime(event_time, event_time_rate) if event_time else None, publisher=publisher))
        told = {*self.waiters(name), *homes(name, self.state.backbone.peers)} - {here}
        waiting = announce_to(self.link, sorted(told), stream)  # (before the publisher gets the reply)
        waiting.extend((r.registered_at, here, r.runtime.id) for r in self.ready_waiting())
        for _, peer, sid in sorted(waiting):
            self.link.activate(peer, sid)

    def announce(self, stream: NetworkStream) -> list[Waiting]:
        """Learn a newly registered stream; answer which waiting subscriptions are now ready."""
        with self.state.lock:
            self.state.known_originals.setdefault(stream.id, stream)
            if self.state.id in stream.route and stream.id not in self.state.table:
                self.state.table.add(stream)
        ready = self.ready_waiting()
        self.announced.update((r.runtime.id, time.time()) for r in ready)  # (activated in order there)
        return [Waiting(r.runtime.id, r.registered_at) for r in ready]

    # ------------------------------------------------------------------ subscriptions

    def subscribe(self, query: str, strategy: str = "sharing", wait_for_streams: bool = False,
                  cancelled: Callable[[], bool] | None = None,
                  time_remaining: float | None = None, user: str = "", from_start: bool = False,
                  since_s: float | None = None, approximate: bool = False,
                  confidence: float = CONFIDENCE, min_rate: int = 64, weight: float = 1.0) -> SubscriptionRecord:
        """``cancelled`` (has the client gone?) and ``time_remaining`` (the client's deadline)
        stop the query's analysis early, as does ``analysis_deadline_s``. ``from_start`` /
        ``since_s``: over everything its streams' super-peers retain / the items that arrived
        there in the last so many seconds, then live (``history.bounds``). ``confidence``: of the
        intervals of an approximate subscription's windows."""
        if since_s is not None and not (0 <= since_s < float("inf")):
            raise NodeError("INVALID_ARGUMENT", f"since: {since_s} is not a duration in seconds")
        if not 0 < confidence < 1:
            raise NodeError("INVALID_ARGUMENT", f"confidence: {confidence} is not between 0 and 1")
        check_bounds(min_rate, weight)
        own = time_remaining is None or self.analysis_deadline_s < time_remaining
        interruption = Interruption(self.analysis_deadline_s if own else time_remaining, cancelled, what=(
            "the super-peer's limit (analysis_deadline_s)" if own else "the request's deadline"))
        steps = StepTimes()
        try:
            with steps.step("analysis"):
                analysis = analyze(query, limits=self.query_limits, check=interruption)
        except WXQueryError as exc:
            raise NodeError("INVALID_ARGUMENT", exc.format("query")) from None
        except AnalysisInterrupted as exc:
            raise NodeError("DEADLINE_EXCEEDED" if exc.reason == "deadline" else "CANCELLED", exc.message) from None
        try:
            strat = Strategy(strategy or "sharing")
        except ValueError:
            raise NodeError("INVALID_ARGUMENT", f"unknown strategy {strategy!r}") from None
        sid = f"{self.state.id}-{uuid.uuid4().hex[:8]}"
        missing = missing_streams(self.state, self.link, analysis)
        if missing and not wait_for_streams:
            raise NodeError("NOT_FOUND", f'unknown stream "{missing[0]}": no super-peer has it registered')
        runtime = SubscriptionRuntime(sid, analysis, self.retention, self.state.limits,
                                      buffer=self.result_buffer(sid, analysis))
        record = SubscriptionRecord(runtime, None, {}, strat, tuple(missing), query=query, user=user,
                                    from_start=from_start or since_s is not None, since_s=since_s,
                                    approximate=approximate, min_rate=min_rate, weight=weight, steps=steps)
        runtime.confidence = confidence
        self.state.store.add_subscription(sid, query, strat.value, record.registered_at, user, confidence,
                                          {"approximate": approximate, "min_rate": min_rate, "weight": weight})
        runtime.start()
        with self.state.lock:
            self.subscriptions[sid] = record
        if missing:
            self.waiting_changed()
        else:
            try:
                self._activate(record, cancelled)
                if cancelled is not None and cancelled():  # (it would never learn the id: not kept)
                    with contextlib.suppress(NodeError):  # (removed meanwhile: gone either way)
                        self.unsubscribe(sid)
                    raise NodeError("CANCELLED", GONE)
            except Exception as exc:  # noqa: BLE001 - whatever failed, nothing is left behind
                with self.state.lock:
                    self.subscriptions.pop(sid, None)
                runtime.stop()
                self.state.store.remove_subscription(sid)
                raise as_node_error(exc, sid) from None
            self.replanned(f"subscription {sid} registered here")
        return record

    def result_buffer(self, sid: str, analysis) -> ResultBuffer:
        return subscription_buffer(self.retention, analysis, self.state.limits.max_read_bytes, self.state.store, sid)

    def ready_waiting(self, older_than: float | None = None) -> list[SubscriptionRecord]:
        """Waiting subscriptions whose streams are now all registered, oldest first."""
        with self.state.lock:
            ready = [r for r in self.subscriptions.values()
                     if r.plan is None and not r.error and r.waiting_for
                     and not self.state.missing_streams(r.runtime.analysis)
                     and (older_than is None or r.registered_at < older_than)]
        return sorted(ready, key=lambda r: r.registered_at)

    def activate_late(self, now: float | None = None) -> None:
        """Activate the waiting subscriptions whose stream's announcement was missed (its
        super-peer was down): not those the stream's peer said it would activate in order, nor
        those whose stream a heartbeat told of just now (its announcement is on its way)."""
        now = now or time.time()
        for record in self.ready_waiting(older_than=now - LATE_ACTIVATION_S):
            if now - self.announced.get(record.runtime.id, 0.0) < ORDERED_ACTIVATION_S:
                continue  # the stream's super-peer activates it, after those registered before it
            if any(now - self.state.heard_of.get(n, 0.0) < LATE_ACTIVATION_S for n in record.waiting_for):
                continue  # (a heartbeat told of the stream just now: its announcement is on its way)
            self.activate(record.runtime.id)

    def activate(self, sid: str) -> tuple[bool, str]:
        """Plan and install one waiting subscription (once; later calls do nothing)."""
        with self.state.lock:
            record = self.subscriptions.get(sid)
            if record is None or record.plan is not None or record.error or not record.waiting_for:
                return False, "not waiting"
            if self.state.missing_streams(record.runtime.analysis):
                return False, "still waiting for a stream"
            record.waiting_for = ()
            self.announced.pop(sid, None)
            record.steps = StepTimes()  # (its registration is its activation, in this thread)
        try:
            self._activate(record)
            return True, ""
        except Exception as exc:  # noqa: BLE001 - the subscription ends with the reason
            error = as_node_error(exc, sid)
            record.error = f"{error.code}: {error.message}"
            record.runtime.buffer.close(error.message, error.code)  # the first close stays: the reason
            record.runtime.stop()
            return False, record.error

    def _activate(self, record: SubscriptionRecord, cancelled: Callable[[], bool] | None = None) -> None:
        """Plan, reserve (re-planning on a refusal), take the inputs here, then commit; a failure
        removes what was installed. ``cancelled``: has the client gone (it stops waiting)?"""
        gone = cancelled or (lambda: False)
        while not self._installing.acquire(timeout=0.1):  # (another may wait for in-flight ones)
            if gone():
                raise NodeError("CANCELLED", GONE)
        try:
            self._install(record, gone)
            record.registration_ms = record.steps.done()
        finally:
            self._installing.release()

    def _install(self, record: SubscriptionRecord, gone: Callable[[], bool]) -> None:
        self.state.check_shapes(record.runtime.analysis)
        deadline = time.monotonic() + INSTALL_DEADLINE_S
        avoid: set[str] = set()  # running replays that could not serve it (``Reserved.refused``)
        retried = False
        widen = True  # (until a stream cannot be widened in place: then planned without widening)
        for again in itertools.count(1):
            plan, view, txn, reservation = self._reserve(record, deadline, avoid, gone, widen)
            if not record.steps.timed("widen", widen_plan, self.link, plan, txn):  # (refused: planned without it)
                self.two_phase.release(record, txn, self.two_phase.involved(plan, view))
                widen = False
                continue
            # over the past: a new copy of each original, filled from its log's first item (or the
            # last ``since_s`` seconds'), then live; or of a running replay, from the item its origin said
            shared = shared_replays(plan)
            fresh = [p.new_streams[0].id for p in plan.parts if p.new_streams[0].id not in shared] if record.from_start else []
            replay = {**{s: 0 for s in fresh}, **reservation.starts} if record.from_start else None
            since = {s: record.since_s for s in fresh} if record.since_s is not None else None
            try:
                reads = self.take_inputs(record, plan)
                with record.steps.step("commit"):
                    commit = self.two_phase.commit(txn, plan, view, replay, since)
                break
            except PlanAgain as refused:  # (undone before anything was sent: plan again)
                self.two_phase.release(record, txn, self.two_phase.involved(plan, view))
                retried = True  # (its earlier attempts' peers, if a removal failed there: not known)
                if again >= REPLANS:  # (a hold lapses only after a reservation's time: no deadline)
                    raise NodeError("ABORTED", f"could not install the plan: {refused.message}") from None
                avoid |= refused.avoid
                deadline = time.monotonic() + INSTALL_DEADLINE_S
            except BaseException:
                self.two_phase.release(record, txn, self.two_phase.involved(plan, view))
                raise
        if not retried:  # (where it was committed: removed there only; else everywhere)
            record.touched[plan.subscription] = frozenset(commit.peers)
        commit.replayed.update(reservation.replayed)
        commit.history.update(reservation.history)
        record.starts = ({name: commit.replayed.get(name, 0) for name in (p.input_properties.input.stream
                                                                          for p in plan.parts)}
                         if record.from_start else commit.logged)
        record.history = "; ".join(commit.history[n] for n in sorted(commit.history))
        record.past = past_of(record, plan, commit.logged, self.state.id) if record.from_start else {}
        record.sample = record.runtime.sample = plan.sample
        record.chains = {} if record.from_start else replay_inputs(plan.parts, view.lineage, commit.anchors, reads)
        record.paths = data_paths(plan, view.lineage)
        remember_reach(self.state, plan.parts)
        record.incarnations = {p: commit.incarnations.get(p) or self.incarnation(p)
                               for path in record.paths for p in path}
        if any(p.widened for p in plan.parts):  # (its stream's consumers move onto it first)
            record.last_replan = time.time()
        record.store_plan(self.state.store)

    def _reserve(self, record: SubscriptionRecord, deadline: float, avoid: set[str],
                 gone: Callable[[], bool], widen: bool = True) -> tuple[Plan, RemotePlanningView, str, Reserved]:
        """Plan and reserve, planning again on a refusal: (plan, view, transaction, what the peers
        said). ``avoid``: running replays that could not serve the subscription, and those it is
        refused by here. A view of only what can serve it, until a plan over it is refused
        (a near miss is then widened only if the stream it widens runs where that view asked)."""
        analysis, refused, last_reason = record.runtime.analysis, 0, ""
        serving = not (record.from_start or record.approximate or self.subnets)
        for attempt in itertools.count():
            if attempt:
                first, most = REPLAN_PAUSE_S
                time.sleep(random.uniform(0, min(most, first * 2 ** min(attempt, 10))))
            if gone():
                raise NodeError("CANCELLED", GONE)
            with record.steps.step("lookups"):
                view = fetch_planning_view(self.state, self.link, analysis.properties, self.new_stream_id,
                                           scoped=True, serving=serving)
            plan = record.steps.timed("planning", self._plan, record, view, avoid, widen)
            if not plan.admitted:
                if serving and view.skipped:  # (those count as last heard, with what they held then)
                    serving = False
                    continue
                settled = settled_view(self.state, view) if time.monotonic() < deadline else None
                if settled is not None and self._plan(record, settled, avoid).admitted:
                    continue  # (it fits once the installations in flight have settled: ``in_flight``)
                bound = beyond_bound(record.approximate, samplable(analysis.properties), record.min_rate)
                raise NodeError("RESOURCE_EXHAUSTED", f"subscription {plan.reason}{bound}")
            # (at once the first time; after a refusal in order, so that a collision has a winner)
            with record.steps.step("reserve"):
                txn, reservation = self.two_phase.reserve(plan, view, record.since_s, ordered=attempt > 0)
            reason = reservation.reason
            if txn:
                return plan, view, txn, reservation
            if reservation.refused:  # (not a refusal for capacity: that replay has gone past)
                avoid.add(reservation.refused)
            elif serving and view.skipped and reservation.at not in view.versions:  # (as last heard)
                serving = False
            elif CONFLICT not in reason:
                refused, last_reason = refused + 1, reason
            if refused >= REPLANS or time.monotonic() >= deadline:
                raise NodeError("ABORTED", f"could not reserve the plan's resources: {last_reason or reason}")

    def _plan(self, record: SubscriptionRecord, view: RemotePlanningView, avoid: set[str],
              widen: bool = True) -> Plan:
        """``widen``: a near miss may widen a running stream (``--widening``), in place where
        this peer's executor can narrow its readers, else by a stream beside it."""
        sid, properties = record.runtime.id, record.runtime.analysis.properties
        try:
            planner = self.make_planner(view)
            if not widen:
                planner.widening = False
            plan = (planner.replay_plan(sid, properties, self.state.id, avoid=frozenset(avoid),
                                        share=record.strategy == Strategy.SHARING)
                    if record.from_start else
                    planner.subscribe(sid, properties, self.state.id, record.strategy,
                                      approximate=record.approximate, coarsest=record.min_rate))
            if self.widen_in_place:
                plan.parts = [in_place(p, view.snapshot.streams) for p in plan.parts]
            return plan
        except (RegistrationError, KeyError) as exc:  # (a KeyError's str() quotes its message)
            raise NodeError("NOT_FOUND", str(exc.args[0]) if exc.args else str(exc)) from None
        except TopologyError as exc:  # (no way into its subnet from where the stream flows)
            raise NodeError("UNAVAILABLE", str(exc)) from None

    def take_inputs(self, record: SubscriptionRecord, plan: Plan) -> dict[str, int]:
        return take_inputs(self.state, self.positions, record, plan)

    def unsubscribe(self, sid: str) -> list[str]:
        with self._installing:  # not while it is being planned again (``recovery.replanning``)
            with self.state.lock:
                record = self.subscriptions.pop(sid, None)
                if record is None:
                    raise NodeError("NOT_FOUND", f"no subscription {sid} at {self.state.id}")
                self.state.stop_delivering(record.runtime, record.inputs.values())
                record.runtime.stop()
                record.runtime.buffer.store = None  # nothing more is stored for it
        self.state.store.remove_subscription(sid)
        owners = [*record.stale, record.plan_id]
        removed = self.two_phase.remove_everywhere(sid, owners, peers=record.touched_by(owners))
        self.replanned(f"subscription {sid} ended here")
        return sorted(set(removed))

    def read_results(self, sid: str, offset: int, max_items: int, wait_s: float, peek: bool = False
                     ) -> tuple[ResultBuffer, tuple[int, list[str], bool, int]]:
        record = self.subscriptions.get(sid)
        if record is None:
            raise NodeError("NOT_FOUND", f"no subscription {sid} at {self.state.id} (unsubscribed, or "
                                         "registered at another super-peer)")
        return record.runtime.buffer, record.runtime.buffer.read(offset, max_items or 1000, wait_s, peek)

    def past_progress(self, record: SubscriptionRecord) -> dict[str, dict]:
        return past_progress(record, self.positions.next)

    def status(self) -> dict:
        return {sid: {**r.status(), "past": self.past_progress(r)} for sid, r in self.subscriptions.items()}

    def start(self) -> None:
        """Nothing runs on its own: subscriptions are registered (or restored) and installed on request."""

    def stop(self) -> None:
        """Post-processing stops for every subscription here (nobody will read it any more)."""
        for record in list(self.subscriptions.values()):
            record.runtime.stop()
