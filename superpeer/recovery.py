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
* it is installed in two phases like any plan, under a new plan id (``sid~n``), and only then is
  the old plan removed, at once where peers answer and later at peers that are down now.

If no path remains, the old plan stays and the subscription stays degraded with the reason; it is
planned again at every round, and is healthy again without a new plan if the peer or link comes
back as it was (a paused process, a restored link). A subscription restored after this peer
restarted is planned the same way at the first round.
"""

from __future__ import annotations

import logging
import threading
import time

from sharing.backbone import TopologyError
from sharing.planner import Planner, RegistrationError

from .control_plane import ControlPlane, SubscriptionRecord, as_node_error, plan_id
from .failure_detector import FailureDetector
from .remote_view import fetch_planning_view
from .route_health import broken, data_paths, remaining_backbone, restarted
from .subscriptions import SubscriptionRuntime

log = logging.getLogger("streamglobe.superpeer")


class Recovery:
    def __init__(self, control: ControlPlane, detector: FailureDetector) -> None:
        self.control = control
        self.detector = detector
        self.stale: dict[str, set[str]] = {}  # peer -> plan ids it may still hold
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="recovery", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    def forget(self, plan_ids: list[str]) -> None:
        """Remove these plans' streams at every peer, now or once it answers again."""
        for peer in self.control.state.backbone.peers:
            self.stale.setdefault(peer, set()).update(plan_ids)

    # ------------------------------------------------------------------ after each heartbeat round

    def after_heartbeat(self) -> None:
        now = time.time()
        for record in list(self.control.subscriptions.values()):
            if record.error or record.runtime.buffer.closed or (record.plan is None and not record.recovering):
                continue  # failed, finished, or waiting for its stream to be registered
            if record.plan is not None and record.incarnations is None:
                record.incarnations = {p: self.detector.incarnation(p) for path in record.paths for p in path}
            reason = ""
            if record.plan is not None:
                reason = (broken(record.paths, self.detector)
                          or restarted(record.incarnations or {}, self.detector))
            elif record.recovering:
                reason = record.degraded or "planning again"
            if reason and not record.degraded:
                log.warning("subscription %s degraded: %s", record.runtime.id, reason)
                record.degraded_since = now
                record.last_failure = reason
            elif record.degraded and not reason:
                log.warning("subscription %s healthy again", record.runtime.id)
                record.degraded_since = now
            if reason and not record.degraded.startswith(reason):
                record.degraded = reason
            elif not reason:
                record.degraded = ""
            record.recovering = bool(reason)
        self._remove_stale()
        self._wake.set()

    def _remove_stale(self) -> None:
        for peer, ids in list(self.stale.items()):
            if peer != self.detector.me and self.detector.peer_state(peer) != "up":
                continue
            for owner in sorted(ids):
                if self.control.link.remove(peer, owner) is not None:
                    ids.discard(owner)
            if not ids:
                self.stale.pop(peer, None)

    # ------------------------------------------------------------------ the worker

    def _run(self) -> None:
        while not self._stopped:
            self._wake.wait()
            self._wake.clear()
            pending = sorted((r for r in list(self.control.subscriptions.values())
                              if r.recovering and not r.error), key=lambda r: r.registered_at)
            for record in pending:
                if self._stopped:
                    return
                try:
                    self.replan(record)
                except Exception as exc:  # noqa: BLE001 - tried again next round
                    self._failed(record, str(as_node_error(exc, record.runtime.id).message))

    def _failed(self, record: SubscriptionRecord, why: str) -> None:
        reason = record.degraded.split("; ", 1)[0] or "planning again"
        if record.degraded != f"{reason}; {why}":  # (tried every round: said once)
            log.warning("subscription %s not planned again yet: %s", record.runtime.id, why)
        record.degraded = f"{reason}; {why}"

    def replan(self, record: SubscriptionRecord) -> bool:
        control, state = self.control, self.control.state
        with control._installing:
            if record.error or not record.recovering or record.runtime.id not in control.subscriptions:
                return False
            analysis = record.runtime.analysis
            missing = state.missing_streams(analysis)
            if missing:
                self._failed(record, f'waiting for stream "{missing[0]}" to be registered again')
                return False
            left = remaining_backbone(state.backbone, self.detector)
            view = fetch_planning_view(state, control.link, analysis.properties, control.new_stream_id,
                                       backbone=left, tables=False)
            new_id = plan_id(record.runtime.id, record.generation + 1)
            try:
                plan = Planner(view.snapshot).replay_plan(new_id, analysis.properties, state.id)
            except (RegistrationError, TopologyError, KeyError) as exc:
                self._failed(record, f"no other path: {str(exc).strip(chr(39))}")
                return False
            if not plan.admitted:
                self._failed(record, f"the remaining backbone cannot carry it: {plan.reason}")
                return False
            txn, reason = control.reserve(plan, view)
            if not txn:
                self._failed(record, f"could not reserve a new path: {reason}")
                return False
            old_ids = [*record.stale, record.plan_id]
            old = record.runtime
            runtime = SubscriptionRuntime(old.id, analysis, control.retention, state.limits, buffer=old.buffer)
            with state.lock:
                for stream in record.inputs.values():
                    state.deliveries[stream] = [(r, v) for r, v in state.deliveries.get(stream, ())
                                                if r is not old]
                old.stop()
                record.runtime = runtime
            runtime.start()
            replay = {p.new_streams[0].id: record.starts.get(p.reused, 0) for p in plan.parts}
            try:
                control.take_inputs(record, plan)
                control.commit(txn, plan, view, replay)
            except Exception as exc:  # noqa: BLE001 - what was installed is removed; tried again
                control.release(record, txn)
                self._failed(record, f"installing the new plan failed: {as_node_error(exc, new_id).message}")
                return False
            record.generation += 1
            record.stale = []
            record.paths = data_paths(plan, view.lineage)
            record.incarnations = None
            record.recovering, record.degraded, record.degraded_since = False, "", time.time()
            record.replans += 1
            state.store.set_plan(record.runtime.id, record.generation, old_ids, record.starts)
        self.forget(old_ids)
        log.warning("subscription %s planned again as %s: %s", record.runtime.id, new_id,
                    plan.describe().replace("\n", " | "))
        return True
