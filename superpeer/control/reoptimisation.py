"""Sharing that lasts: the subscriptions registered at a super-peer are planned again while they
run, and moved to a cheaper plan without a gap or a duplicate (DESIGN.md §12, issue 31).

Registration plans a subscription once, over the streams that flow at that moment; later
subscriptions, unsubscriptions and failures change what the best plan would be. So, every
``every_s`` and after events that can change it (a subscription registered or ended here, a
re-plan after a failure, a peer back), this peer runs SUBSCRIBE again for each subscription
registered here, over a fresh view in which the streams only this subscription uses are taken
out (what they cost is what the new plan must beat; they must not be reused by it):

* a new plan is taken only if the network carries less with it by the margin — its new streams,
  less the running plan's own, less what the moves it opens save (``sharing.reoptimisation``)
  — and not within ``cooldown_s`` of the subscription's last re-plan (no flapping); after a
  cancelled move, the wait doubles;
* it is installed in two phases under a new plan id, like a failure's re-plan; the
  subscription's input is then fed by a ``TrackSwitch`` from both plans until the switch item
  is passed (``subscriptions.track_switch``); only then are the old plan's streams removed,
  along their routes. A switch not done in ``SWITCH_DEADLINE_S`` (the new plan delivered
  nothing, or the old one did not reach the switch item), or whose old route broke, is
  cancelled: the old plan, which fed everything so far, goes on alone, the new one is removed;
* every re-plan (a failure's too) is in the plan history: when, why, the costs, the streams reused.

What moves this way: a subscription reading one input, of per-item operators (selection,
projection, its restructuring here) or windows aggregated in the network — time windows switched
by window index, count windows too once the new operator is aligned with the old one's
(``count_handover``) — on peers whose executor says where each item came from (the inline one).
A subscription over the past moves once its replay has caught up with the live stream (its
private copy of the original is then what a shared stream can replace). Joins keep their plan
(``status`` says why); a failure still re-plans them.
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
import time
from collections.abc import Callable

from sharing.backbone import TopologyError
from sharing.estimates import with_sample
from sharing.planner import Plan, Planner, RegistrationError, Strategy
from sharing.properties import Properties
from sharing.reoptimisation import choose, follow_gain, own_streams, without
from sharing.stream_table import lineage
from sharing.subnet_planning import planner_within

from ..errors import NodeError, as_node_error
from ..recovery.replanning import Recovery
from ..recovery.route_health import around_failures, broken, data_paths, restarted
from ..subscriptions.plan_history import note_replan
from ..subscriptions.record import SubscriptionRecord
from ..subscriptions.track_switch import TrackSwitch, progress_stream
from .control_plane import ControlPlane
from .count_handover import CountHandover, handover_for
from .live_move import Move, attach, detach, restore, stalled_new_plan
from .planned_over import PlannedOver, planned_over, unchanged
from .remote_view import RemotePlanningView, fetch_planning_view
from .reoptimisation_settings import ReoptimisationSettings
from .staying import backing_off, cooling, note_move, replaying_its_past, staying_here, stays

log = logging.getLogger("streamglobe.superpeer")

# the look-ahead: another subscription's best plan of what it reads, at its registering peer
FOLLOW = follow_gain(Planner, lambda planner, props, target: planner.best_part(props, target))
SWITCH_CHECK_S = 0.05  # how often a pending switch is looked at
ADAPT_EVERY_S = 1.0  # how often the samples of approximate subscriptions are looked at
SWITCH_DEADLINE_S = 60.0  # a switch not done by then is cancelled: the old plan goes on alone
LEFT_HOLD_COOLDOWNS = 3  # a stream left for the followers' sake is not taken again for this many cool-downs
QUIET_S = 0.5  # an event's round waits until events have stopped coming this long (a burst of
# registrations is planned once, after it, and never delays the registrations themselves)


class Reoptimiser:
    def __init__(self, control: ControlPlane, recovery: Recovery, settings: ReoptimisationSettings,
                 synchronous: bool) -> None:
        """``synchronous``: the executor here delivers a push's outputs before it returns, and
        says where each came from (the inline one): what a switch needs of this peer."""
        self.control = control
        self.recovery = recovery
        self.settings = settings
        self.synchronous = synchronous
        self.switches: dict[str, Move] = {}  # sid -> its move, while it switches
        self.rounds = 0
        self.planned: dict[str, PlannedOver] = {}  # sid -> what its last round kept it over
        self.migrations = 0
        self.adapt: Callable[[], None] = lambda: None  # (the node sets it: ``adaptive_sampling``)
        self._wake = threading.Event()
        self._why = ""
        self._changes = False  # a wake since the last round was for a change a plan reads
        self.skipped = 0  # subscriptions not planned again: nothing they were planned over changed
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="reoptimise", daemon=True)
        control.state.staying = staying_here(control.state.id, (), settings.enabled, synchronous)

    def start(self) -> None:
        if self.settings.enabled or self.settings.adaptive:  # (adaptive sampling moves by switches too)
            self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    def wake(self, why: str, changes: bool = True) -> None:
        """An event that can change the best plans: a round soon (after the cool-downs). Unless it
        ``changes`` what plans read (drifted rates do not), the round skips as a periodic one does."""
        self._why = self._why or why
        self._changes = self._changes or changes
        self._wake.set()

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stopped:
            timeout = SWITCH_CHECK_S if self.switches else min(self.settings.every_s, ADAPT_EVERY_S)
            self._wake.wait(timeout)
            self._wake.clear()
            if self._stopped:
                return
            try:
                self.finish_switches()
                if self.settings.adaptive:
                    self.adapt()  # (``adaptive_sampling``: approximate subscriptions' samples; never raises)
                if self._why and self.settings.enabled:
                    self._quiet()
                now = time.monotonic()
                why, self._why = self._why, ""
                changes, self._changes = self._changes, False
                if self.settings.enabled and (why or now - last >= self.settings.every_s):
                    last = now
                    self.round(why or "periodic", skip_unchanged=not (why and changes))
            except Exception:  # noqa: BLE001 - the loop must go on
                log.exception("re-optimisation round failed")

    def _quiet(self) -> None:
        """Wait until no event came for ``QUIET_S`` (for at most a round's interval), finishing
        pending switches meanwhile."""
        until = time.monotonic() + self.settings.every_s
        while not self._stopped and time.monotonic() < until:
            if not self._wake.wait(QUIET_S):
                return
            self._wake.clear()
            self.finish_switches()

    def round(self, why: str, skip_unchanged: bool = False) -> None:  # (skip: ``planned_over``)
        self.rounds += 1
        with self.control.state.lock:
            records = sorted(self.control.subscriptions.values(), key=lambda r: r.registered_at)
            for gone in self.planned.keys() - self.control.subscriptions.keys():
                del self.planned[gone]
        state = self.control.state
        state.staying = staying_here(state.id, records, True, self.synchronous, self.settings.cooldown_s)
        for record in records:
            if self._stopped:
                return
            try:
                self.consider(record, why, skip_unchanged)
            except Exception as exc:  # noqa: BLE001 - the next one is still considered
                record.reoptimisation = f"not re-planned: {as_node_error(exc, record.runtime.id).message}"
                expected = isinstance(exc, NodeError)  # (a peer down, a refusal: said in a line)
                (log.warning if expected else log.exception)("%s %s", record.runtime.id, record.reoptimisation)

    def why_not(self, record: SubscriptionRecord, cooled: bool = True, backoff: bool = True) -> str:
        """Why this subscription is not considered now ("" if it is; ``cooled``: not within the
        cool-down of its last re-plan either; ``backoff``: nor within the wait after cancelled
        moves — a sample lowered under pressure does not wait it out)."""
        if (record.plan is None or record.error or record.recovering or record.replanning
                or record.runtime.buffer.closed):
            return "not running"
        if record.runtime.id in self.switches:
            return "switching to its new plan"
        staying = stays(record, self.synchronous)
        if staying:
            return staying
        replaying = replaying_its_past(record, self.control.positions.next)
        if replaying:
            return replaying
        entry = self.control.state.table.get(next(iter(record.inputs.values()), ""))
        if entry is None:
            return "not running"
        if entry.kind == "records" and record.runtime.analysis.properties.inputs[0].window is None:
            return "reads window records of no window of its own"
        waiting = backing_off(record) if backoff else ""
        if waiting:
            return waiting
        return cooling(record, self.settings.cooldown_s) if cooled else ""

    # ------------------------------------------------------------------ one subscription

    def consider(self, record: SubscriptionRecord, why: str, skip_unchanged: bool = False) -> bool:
        """Plan the subscription again and move it if the network's cost falls by the margin.
        The planning (lookups at other peers, SUBSCRIBE, the look-ahead) runs without the
        installing lock, so that a registration here never waits for a round's planning; the
        move is installed with it, after checking that nothing changed the subscription
        meanwhile (a plan over tables that changed is refused as stale by their peers)."""
        reason = self.why_not(record)
        if reason:
            record.reoptimisation = reason
            return False
        if skip_unchanged and unchanged(self.planned.get(record.runtime.id), record, self.control.state):
            self.skipped += 1
            return False  # (what it was planned over is as it was: ``planned_over``)
        decided = self._plan(record, why)
        if decided is None:
            return False
        plan, view, old_cost, new_cost, variable, old_stream, change, handover, left = decided
        broken_now = broken(data_paths(plan, view.lineage), self.recovery.detector)
        if broken_now:  # (a stream it would reuse passes a peer or link down: it would stall)
            record.reoptimisation = f"kept: the better plan's route is broken ({broken_now})"
            return False
        with self.control._installing:
            reason = self.why_not(record)
            if reason or record.inputs.get(variable) != old_stream:
                record.reoptimisation = reason or "kept: its plan changed while a new one was made"
                return False
            moved = self.migrate(record, plan, view, why, (old_cost, new_cost, change), variable, old_stream,
                                 handover)
            if moved and left is not None:  # (taken for the followers: they get time to follow)
                record.leave_for_followers(left, LEFT_HOLD_COOLDOWNS * self.settings.cooldown_s)
            return moved

    def _plan(self, record: SubscriptionRecord, why: str) -> tuple | None:
        """The move to make, if any: (plan, view, old cost, new cost, variable, old stream, change
        of the network's cost, count handover, the streams left for the followers' sake or None)."""
        control, state = self.control, self.control.state
        sid = record.runtime.id
        props = with_sample(record.runtime.analysis.properties, record.sample)  # (the sample it is on)
        view = fetch_planning_view(state, control.link, props, control.new_stream_id, scoped=True)
        self.planned.pop(sid, None)
        decided = self._decide(record, props, view)
        if decided is None:  # (kept: a periodic round plans it again once what it read changes)
            self.planned[sid] = planned_over(view.versions, record)
        return decided

    def _decide(self, record: SubscriptionRecord, props: Properties, view: RemotePlanningView) -> tuple | None:
        state, sid = self.control.state, record.runtime.id
        streams = dict(view.snapshot.streams)  # (before its own streams are taken out)
        without(view.snapshot, {**own_streams(streams, sid), **around_failures(view.snapshot, self.recovery.detector)})
        new_id = f"{sid}~{secrets.token_hex(3)}"
        planner, subnets = Planner(view.snapshot), self.control.subnets  # (no widening: it only follows one)
        inside = planner if subnets is None else planner_within(view.snapshot, subnets, state.id, props)  # (candidates)
        try:
            plan = inside.subscribe(new_id, props, state.id, Strategy.SHARING)
        except (RegistrationError, TopologyError, KeyError) as exc:
            record.reoptimisation = f"no plan now: {exc}"
            return None
        variable, old_stream = next(iter(record.inputs.items()))
        # (and the plan a fresh network would start from: its operators at the original's
        # peer — SUBSCRIBE prices only the two copies of equal streams nearest the target,
        # and a copy of the raw stream the subscription itself brought near hides it)
        inp = props.inputs[0]
        plan.parts[0].alternatives.append(inside.query_shipping_part(inp, inside.state.original(inp.input),
                                                                     state.id))
        move = choose(planner, plan.parts[0], old_stream, sid, self.settings.margin, streams, FOLLOW,
                      avoid=record.held_off())
        part, old_cost, new_cost = move.part, move.running.marginal, move.best.marginal
        record.reoptimisation = (f"kept: the best other plan costs {new_cost:.4g} at the margin "
                                 f"(the running one {old_cost:.4g}, its share {move.running.share:.4g}); the "
                                 f"network's cost would change by {move.change:+.4g} (margin "
                                 f"{self.settings.margin:g})")
        if part is None:
            return None
        plan = planner.plan(new_id, props, state.id, Strategy.SHARING, lambda inp, original, target: part)
        if not plan.admitted:
            return None
        new_stream = plan.parts[0].result_stream
        old_entry = state.table.get(old_stream)
        new_entry = (next((s for s in plan.parts[0].new_streams if s.id == new_stream), None)
                     or view.snapshot.streams.get(new_stream))
        if new_stream == old_stream or old_entry is None or new_entry is None or new_entry.kind != old_entry.kind:
            return None  # (records of other windows: not switched by window)
        handover = None
        if old_entry.kind == "records" and props.inputs[0].window.kind == "count":
            handover = handover_for({**{s.id: s for s in state.table}, **streams}, old_stream, new_stream,
                                    {s.id: s for s in plan.parts[0].new_streams})
            if isinstance(handover, str):
                record.reoptimisation = f"kept: {handover}"
                return None
        keeps = {s.id for s in lineage(streams, part.reused)}  # (the wide stream's parent is the narrow one's)
        left = (frozenset(s.id for s in lineage(streams, old_stream) if not s.original and s.id not in keeps)
                if move.credited else None)
        return plan, view, old_cost, new_cost, variable, old_stream, move.change, handover, left

    def migrate(self, record: SubscriptionRecord, plan: Plan, view: RemotePlanningView, why: str,
                 costs: tuple[float, float, float], variable: str, old_stream: str,
                 handover: CountHandover | None, sample: int | None = None) -> bool:
        """``costs``: the old plan's, the new one's, and the change of the network's cost;
        ``sample``: the new plan reads a 1/sample sample (from the switch on, its windows are
        scaled at that rate)."""
        control, state = self.control, self.control.state
        old_cost, new_cost, move_change = costs
        sid, new_id = record.runtime.id, plan.subscription
        old_ids = [*record.stale, record.plan_id]
        old_paths = record.paths
        old_peers = record.held_by(old_ids, state.backbone.peers)
        # the attempt's id is stored before anything is reserved: a crash now leaves nothing a
        # restart would not remove
        record.store_plan(state.store, stale=[*record.stale, new_id])
        txn, reservation = control.two_phase.reserve(plan, view)
        if not txn:
            record.reoptimisation = f"kept: could not reserve the new plan ({reservation.reason})"
            return False
        new_stream = plan.parts[0].result_stream
        window = record.runtime.analysis.properties.inputs[0].window
        records = state.table.get(old_stream) is not None and state.table.get(old_stream).kind == "records"
        switch = TrackSwitch(record.runtime, variable, old_stream, new_stream, by_window=handover is not None,
                             partial_windows=math.ceil(window.size / window.step)
                             if records and window and handover is None else 0,
                             sample=sample)
        with state.lock:
            attach(state, switch, record.runtime)
        try:
            done = control.two_phase.commit(txn, plan, view, held=[handover.new_stream] if handover else None)
        except Exception as exc:  # noqa: BLE001 - the old plan goes on alone, unless it is too late
            why = f"installing the new plan failed: {as_node_error(exc, new_id).message}"
            with state.lock:
                switched = switch.complete and not switch.failed
                if not switched:
                    switch.fail(why)
                detach(state, switch, old_to_runtime=not switched, keep_new=False)
                if switched:  # (part of the new plan fed it already, past the switch: recomputed, exactly)
                    record.stale, record.sample = [*record.stale, new_id], record.sample if sample is None else sample
                    # (its old plan's path is healthy: the next heartbeat must not call it so)
                    record.must_replan = f"switching plans: {why}"
                    record.recovering, record.degraded, record.degraded_since = True, record.must_replan, time.time()
            if switched:
                self.recovery.after_heartbeat()
            else:
                self._undo(txn, new_id, plan, view)
            record.reoptimisation = f"kept: {why}"
            return False
        paths = data_paths(plan, view.lineage)
        new_peers = {p for path in paths for p in path} | {p for s in plan.parts[0].new_streams
                                                           for p in (s.origin, *s.route)}
        restore = {"plan": record.plan, "inputs": dict(record.inputs), "owner": record.owner, "sample": record.sample,
                   "stale": list(record.stale), "paths": record.paths, "incarnations": dict(record.incarnations)}
        with state.lock:
            old_plan = record.plan
            record.past = {}  # (caught up: ``why_not``; its copy goes with the old plan)
            record.plan, record.inputs = plan, {variable: new_stream}
            record.owner, record.stale = new_id, old_ids
            record.touched[new_id] = frozenset(done.peers | new_peers)
            record.paths, record.sample = paths, record.sample if sample is None else sample
            record.incarnations = {p: done.incarnations.get(p) or control.incarnation(p)
                                   for path in paths for p in path}
            record.last_replan = time.time()
            note_move(record, self.settings.cooldown_s, record.last_replan)
            entry = note_replan(record, why, None if math.isnan(old_cost) else old_cost, new_cost, plan, old_plan)
            entry["state"] = "switching"
            if sample is not None:
                entry["sample"] = f"1/{restore['sample']} → 1/{sample}"
        record.store_plan(state.store, new_id, old_ids)
        self.switches[sid] = Move(switch, record, entry, old_ids, old_peers, old_paths, restore, new_id, new_peers,
                                  progress_stream(state, old_stream), handover)
        self.migrations += 1
        record.reoptimisation = f"moving to {new_id} ({why})" + (
            "" if math.isnan(move_change) else f": the network's cost falls by {-move_change:.4g}")
        log.warning("subscription %s re-planned as %s (%s): cost %.4g -> %.4g: %s", sid, new_id, why,
                    old_cost, new_cost, plan.describe().replace("\n", " | "))
        return True

    # ------------------------------------------------------------------ switches

    def finish_switches(self) -> None:
        """Look at each pending switch: once done, the old plan is removed along its routes; one
        that cannot finish is cancelled (with the installing lock: recovery is not re-planning
        the same subscription meanwhile)."""
        state = self.control.state
        for sid, move in list(self.switches.items()):
            switch, record = move.switch, move.record
            if move.handover is not None:  # (its calls, before the locks are taken)
                move.handover.step(self.control.link)
            with self.control._installing, state.lock:
                if move.handover is not None and move.handover.failed and not switch.done:
                    switch.fail(move.handover.failed)
                if switch.runtime is not record.runtime or self.control.subscriptions.get(sid) is not record:
                    detach(state, switch, old_to_runtime=False, keep_new=False)  # re-planned, or ended
                    del self.switches[sid]
                    move.entry["state"] = "replaced"
                    continue
                if move.progress is not None:
                    switch.progress(self.control.positions.next.get(move.progress, 0))
                late = time.monotonic() - move.since > SWITCH_DEADLINE_S
                old_broken = (broken(move.paths, self.recovery.detector)
                              or restarted(move.restore["incarnations"], self.recovery.detector))
                stalled = stalled_new_plan(move)
                if not switch.done and not late and not old_broken and not stalled:
                    continue
                del self.switches[sid]
                if switch.ended and not switch.failed:  # (the input ended: nothing more comes)
                    detach(state, switch, old_to_runtime=False, keep_new=False)
                    move.entry.update(state="ended")
                    cancelled = False
                elif switch.done and not switch.failed:
                    detach(state, switch, old_to_runtime=False, keep_new=True)
                    move.entry.update(state="switched", switched_at_item=switch.at)
                    record.cancels = 0
                    cancelled = False
                else:  # the old plan fed everything so far: it goes on alone, the new one is removed
                    why = switch.failed or (
                        "the old plan's route broke" if old_broken else
                        stalled or "the new plan delivered nothing" if switch.at is None else
                        f"the old plan did not reach item {switch.at} in {SWITCH_DEADLINE_S:g} s")
                    switch.fail(why)
                    detach(state, switch, old_to_runtime=True, keep_new=False)
                    restore(record, move.restore)
                    move.entry.update(state="cancelled", why_cancelled=why)
                    record.reoptimisation = f"the move to {move.new_id} was cancelled: {why}"
                    record.cancels += 1  # (each cancel doubles the wait before the next try)
                    record.no_longer_left()
                    record.last_replan = time.time() + self.settings.cooldown_s * (2 ** min(record.cancels, 5) - 1)
                    cancelled = True
                if cancelled:
                    record.stale = [*record.stale, move.new_id]
                else:
                    record.stale = [i for i in record.stale if i not in move.ids]
                    record.forget_plans(move.ids)
                record.store_plan(state.store)
            if cancelled:
                self._remove([move.new_id], move.new_peers)
            else:
                self._remove(move.ids, move.peers)

    def _undo(self, txn: str, new_id: str, plan: Plan, view: RemotePlanningView) -> None:
        peers = self.control.two_phase.reached(plan, view)  # (a commit wave may have marked it a user)
        for peer in sorted(peers):
            try:
                self.control.link.abort(peer, txn)
                self.control.link.remove(peer, new_id)
            except Exception:  # noqa: BLE001 - removed when it answers again
                self.recovery.forget([new_id], [peer])

    def _remove(self, ids: list[str], peers: set[str]) -> None:
        """The old plan's streams, at the peers it touched (now, or once they answer)."""
        for peer in sorted(peers):
            for owner in ids:
                if self.control.link.remove(peer, owner) is None:
                    self.recovery.forget([owner], [peer])

    def status(self) -> dict:
        return {"enabled": self.settings.enabled, "every_s": self.settings.every_s,
                "margin": self.settings.margin, "cooldown_s": self.settings.cooldown_s,
                "rounds": self.rounds, "migrations": self.migrations, "skipped_unchanged": self.skipped,
                "switching": {sid: {"at_item": m.switch.at, "held": len(m.switch.held),
                                    **({"aligning": m.handover.waiting or "asked"}
                                       if m.handover is not None and not m.handover.aligned else {})}
                              for sid, m in list(self.switches.items())}}

