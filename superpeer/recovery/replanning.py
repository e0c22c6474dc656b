"""Subscriptions planned again when their route breaks (DESIGN.md §5, issue 13).

After every heartbeat round the subscription's registering super-peer checks the path its items
take (``route_health``): a peer or link on it that is down, or a peer that answers as a new
process (it restarted: the streams it held are gone), makes the subscription **degraded**, and
a worker thread plans it again on the backbone that remains:

* the new plan (``Planner.replay_plan``) takes a new copy of each original stream from its
  super-peer, which fills it from the stream's log from the item the subscription began with
  (``DataPlane.replay``), and runs every operator here;
* a new post-processing runtime recomputes the results from there into the same result buffer,
  which skips those it already has — the subscriber sees no gap and no duplicate, window
  aggregates included (recomputation is GenMig's snapshot-equivalent migration in its plainest
  form: the new plan's output equals the old one's);
* it is installed in two phases like any plan, under a new plan id (``sid~xxxxxx``), and only then is
  the old plan removed, at once where peers answer and later at peers that are down now.

If no path remains, the old plan stays and the subscription stays degraded with the reason; it is
planned again at every round, and is healthy again without a new plan if the peer or link comes
back as it was (a paused process, a restored link). A subscription restored after this peer
restarted is planned the same way at the first round.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable

from sharing.backbone import TopologyError
from sharing.estimates import with_sample
from sharing.planner import Plan, Planner, RegistrationError

from ..control.announcements import missing_streams
from ..control.control_plane import ControlPlane
from ..control.remote_view import fetch_planning_view
from ..errors import as_node_error
from ..subscriptions.plan_history import note_replan
from ..subscriptions.record import SubscriptionRecord, past_of, replaced_by
from ..subscriptions.runtime import SubscriptionRuntime
from .failure_detector import FailureDetector
from .resume import resume_points, resume_starts
from .route_health import broken, data_paths, remaining_backbone, restarted

log = logging.getLogger("streamglobe.superpeer")


class Recovery:
    def __init__(self, control: ControlPlane, detector: FailureDetector) -> None:
        self.control = control
        self.detector = detector
        self.stale: dict[str, set[str]] = {}  # peer -> plan ids it may still hold
        self._lock = threading.Lock()  # records' health fields and ``stale``
        self._wake = threading.Event()
        self._stopped = False
        self.replanned: Callable[[str], None] = lambda why: None  # (``control.reoptimisation``)
        self.moving: Callable[[str], bool] = lambda sid: False  # a switch of its plans is pending (idem)
        self._up: set[str] = set()  # the peers up at the last round: one back is an event
        self._thread = threading.Thread(target=self._run, name="recovery", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    def forget(self, plan_ids: list[str], peers: list[str] | None = None) -> None:
        """Remove these plans' streams at ``peers`` (default: every peer), now or once it
        answers again."""
        with self._lock:
            for peer in self.control.state.backbone.peers if peers is None else peers:
                self.stale.setdefault(peer, set()).update(plan_ids)

    # ------------------------------------------------------------------ after each heartbeat round

    def after_heartbeat(self) -> None:
        """Check every subscription's path (in the heartbeat thread: no remote calls here);
        the worker plans again those that need it and removes stale plans."""
        now = time.time()
        up = {p for p in self.control.state.backbone.peers if self.detector.peer_state(p) == "up"}
        back, gone, self._up = up - self._up, self._up - up, up
        if (back and len(back) < len(up)) or gone:  # (not the first round)
            # the backbone changed: what moved before says nothing of where the best plans are
            # now, so no subscription here waits out the damping of its earlier moves — the
            # whole network settles anew (the re-plans around a dead peer fold back sooner)
            for record in list(self.control.subscriptions.values()):
                record.moves = []
            self.replanned(", ".join([*(f"{p} up again" for p in sorted(back)), *(f"{p} down" for p in sorted(gone))]))
        with self._lock:
            for record in list(self.control.subscriptions.values()):
                if (record.error or record.replanning or record.runtime.buffer.closed
                        or (record.plan is None and not record.recovering)):
                    continue  # failed, being planned, finished, or waiting for its stream
                reason = ""
                if record.plan is not None:
                    for p, known in record.incarnations.items():
                        if not known:  # not heard at installation: the first process heard since
                            record.incarnations[p] = self.detector.incarnation(p)
                    reason = (broken(record.paths, self.detector) or restarted(record.incarnations, self.detector)
                              or record.must_replan)
                elif record.recovering:
                    reason = record.degraded or "planning again"
                if reason and not record.degraded:
                    log.warning("subscription %s degraded: %s", record.runtime.id, reason)
                    record.degraded_since = now
                    record.last_failure = reason
                elif record.degraded and not reason:
                    log.warning("subscription %s healthy again", record.runtime.id)
                    record.degraded_since = now
                if not reason:
                    record.degraded = ""
                elif not record.degraded.startswith(reason):
                    record.degraded = reason
                record.recovering = bool(reason)
        self._wake.set()

    def _remove_stale(self) -> None:
        with self._lock:
            work = [(peer, sorted(ids)) for peer, ids in self.stale.items()
                    if peer == self.detector.me or self.detector.peer_state(peer) == "up"]
        for peer, ids in work:
            for owner in ids:
                if self.control.link.remove(peer, owner) is not None:
                    with self._lock:
                        left = self.stale.get(peer, set())
                        left.discard(owner)
                        if not left:
                            self.stale.pop(peer, None)

    # ------------------------------------------------------------------ the worker

    def _run(self) -> None:
        while not self._stopped:
            self._wake.wait()
            self._wake.clear()
            try:
                with self._lock:
                    pending = sorted((r for r in list(self.control.subscriptions.values())
                                      if r.recovering and not r.error and not r.replanning),
                                     key=lambda r: r.registered_at)
                    for record in pending:
                        record.replanning = True
                for record in pending:
                    if self._stopped:
                        return
                    try:
                        self.replan(record)
                    except Exception as exc:  # noqa: BLE001 - tried again next round
                        self._failed(record, str(as_node_error(exc, record.runtime.id).message))
                    finally:
                        record.replanning = False
                self._remove_stale()
            except Exception:  # noqa: BLE001 - the worker must go on
                log.exception("recovery round failed")

    def _failed(self, record: SubscriptionRecord, why: str) -> None:
        with self._lock:
            reason = record.degraded.split("; ", 1)[0] or "planning again"
            if record.degraded != f"{reason}; {why}":  # (tried every round: said once)
                log.warning("subscription %s not planned again yet: %s", record.runtime.id, why)
            record.degraded = f"{reason}; {why}"

    def replan(self, record: SubscriptionRecord) -> bool:
        control, state = self.control, self.control.state
        sid = record.runtime.id
        with control._installing:
            if record.error or not record.recovering or sid not in control.subscriptions:
                return False
            analysis = record.runtime.analysis
            missing = missing_streams(state, control.link, analysis)  # (a restarted peer: the homes asked)
            if missing:
                self._failed(record, f'waiting for stream "{missing[0]}" to be registered again')
                return False
            left = remaining_backbone(state.backbone, self.detector)
            # (the peers' tables say which of the replaced plan's streams others use too)
            view = fetch_planning_view(state, control.link, analysis.properties, control.new_stream_id,
                                       backbone=left)
            record.replaced = record.replaced or record.plan
            new_id = f"{sid}~{secrets.token_hex(3)}"
            if record.replaced is not None:  # what the plan it replaces takes is freed with it
                release_usage(view.snapshot, record.replaced, new_id)
            try:
                plan = Planner(view.snapshot).replay_plan(new_id, with_sample(analysis.properties, record.sample),
                                                          state.id, record.chains)
                plan.sample = record.sample
            except (RegistrationError, TopologyError, KeyError) as exc:
                self._failed(record, f"no other path: {str(exc).strip(chr(39))}")
                return False
            if not plan.admitted:
                self._failed(record, f"the remaining backbone cannot carry it: {plan.reason}")
                return False
            # the attempt's id is stored before anything is reserved: a crash now leaves nothing
            # a restart would not remove
            record.store_plan(state.store, stale=[*record.stale, new_id])
            txn, reservation = control.two_phase.reserve(plan, view)
            reason = reservation.reason
            if not txn:
                self._failed(record, f"could not reserve a new path: {reason}")
                return False
            old_ids = [*record.stale, record.plan_id]
            old = record.runtime
            record.starts.update(old.join_starts())  # (a joined stream reused: where it began)
            with state.lock:  # (nothing more reaches it from the old plan once its point is read)
                resume, not_resumed = resume_points(record, state.deliveries, self.moving(sid))
                state.stop_delivering(old, record.inputs.values())
            if not resume:  # recomputed from the first item: a new runtime, the results it has skipped
                runtime = SubscriptionRuntime(sid, analysis, control.retention, state.limits, buffer=old.buffer)
                # its sample's rate (the new plan's: its window records are scaled at it), and its
                # windows' intervals, given once
                runtime.sample, runtime.estimates, runtime.confidence = record.sample, old.estimates, old.confidence
                runtime.ensure_estimates()
                with state.lock:
                    old.stop()
                    record.runtime = runtime
                runtime.start()
            starts = resume_starts(plan, resume) if resume else replay_starts(record, plan)
            try:
                control.take_inputs(record, plan)
                done = control.two_phase.commit(txn, plan, view, starts)
            except Exception as exc:  # noqa: BLE001 - what was installed is removed; tried again
                involved = control.two_phase.involved(plan, view)
                control.two_phase.release(record, txn, involved)
                self.forget([new_id], sorted(involved))
                self._failed(record, f"installing the new plan failed: {as_node_error(exc, new_id).message}")
                return False
            paths = data_paths(plan, view.lineage)
            with self._lock:
                entry = note_replan(record, f"failure: {record.last_failure or record.degraded}",
                                    record.replaced.cost if record.replaced is not None else None, plan.cost,
                                    plan, record.replaced)
                if resume:
                    entry["resumed_at_item"] = resume
                else:
                    entry["recomputed_from_item"] = {p.input_properties.variable: starts[p.new_streams[0].id]
                                                     for p in plan.parts if p.new_streams[0].id in starts}
                    entry["not_resumed"] = not_resumed
                # resumed: a private copy for the moment, which the next round may fold back onto
                # shared streams at once (no cool-down: nothing was chosen here to flap back from)
                record.last_replan = 0.0 if resume and not record.cancels else time.time()
                record.moves = []  # (the moves before the failure say nothing of those it needs now)
                record.owner, record.stale = new_id, []
                record.touched[new_id] = frozenset(done.peers)
                gone = record.touched_by(old_ids)  # (where the old plans were: None, every peer)
                record.forget_plans(old_ids)
                record.paths = paths
                record.incarnations = {p: done.incarnations.get(p) or self.detector.incarnation(p)
                                       for path in paths for p in path}
                record.recovering, record.degraded, record.degraded_since = False, "", time.time()
                record.must_replan = ""
                # over the past: the new plan's replay (from where the subscription began) is told
                record.past = past_of(record, plan, done.logged, state.id, resume) if record.from_start else {}
                record.caught_up = record.caught_up and bool(resume)  # (recomputed: from its first item again)
                record.replans += 1
                record.replaced = None
            record.store_plan(state.store, new_id, old_ids)
            self.forget(old_ids, None if gone is None else sorted(gone))
        log.warning("subscription %s planned again as %s, %s: %s", sid, new_id,
                    f"resumed at item {resume}" if resume else f"recomputed from its first item ({not_resumed})",
                    plan.describe().replace("\n", " | "))
        self.replanned(f"subscription {sid} planned around a failure")
        return True


def replay_starts(record: SubscriptionRecord, plan: Plan) -> dict[str, int]:
    """Where each stream of a replay plan starts: the copy of the original at its first log
    item to replay, each level of the chain dropping its items below where the next one began
    (``sharing.replay``); without a known chain, the copy at the items logged at installation."""
    starts: dict[str, int] = {}
    for p in plan.parts:
        chain = record.chains.get(p.input_properties.variable)
        if chain is None:
            starts[p.new_streams[0].id] = record.starts.get(p.reused, 0)
            continue
        starts[p.new_streams[0].id] = chain.start
        for s, drop in zip(p.new_streams[1:], chain.drops()):
            starts[s.id] = drop
    return starts


def release_usage(snapshot, plan: Plan, new_id: str) -> None:
    """Take out of a planning snapshot's usage what ``plan``'s streams use that only this
    subscription's plans use (``replaced_by``: what the peers will not count either)."""
    for s in (s for p in plan.parts for s in p.new_streams):
        seen = snapshot.streams.get(s.id)
        if seen is None or not replaced_by(seen, new_id):
            continue
        for link, bits in s.usage.links.items():
            if link in snapshot.link_used:
                snapshot.link_used[link] = max(snapshot.link_used[link] - bits, 0.0)
        for peer, cores in s.usage.peers.items():
            if peer in snapshot.peer_used:
                snapshot.peer_used[peer] = max(snapshot.peer_used[peer] - cores, 0.0)
