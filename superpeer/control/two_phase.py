"""The two-phase coordinator a super-peer installs its subscriptions' plans with (DESIGN.md §5,
``control_plane``): reserve on every peer the new streams pass (and this one) in one global
order, commit on the peers the plan touches in waves — those that start nothing together, then
the new streams' origins, farther after nearer — and undo a half-done installation.

A subscription over the past served from a replay that is already running
(``sharing.replay_plans``) also reserves at the replay's origin, which says where the
subscription starts in the stream and holds the replay before that item (``log_replay``) until
every peer has committed — the new copy is then in place downstream before the item passes it —
and the transaction is ended there (an abort after the commit only lets the replay go on). A
replay that has passed the item refuses, naming its copy: the subscription is planned again
without it. The replay's origin commits first: it checks that the hold is still there (it lapses
if the coordinator takes too long) and makes it outlast every reservation still to be committed;
a hold found gone there, before any peer has started a new stream, undoes the plan and plans
again (``PlanAgain``) instead of failing the subscription.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from sharing.planner import Plan
from sharing.replay_plans import shared_replays
from sharing.stream_table import NetworkStream

from ..errors import NodeError
from ..peer_state import PeerState
from .peer_link import PeerLink, Reserved
from ..subscriptions.record import SubscriptionRecord
from .participant import CONFLICT, PLAN_AGAIN
from .remote_view import RemotePlanningView, in_parallel

log = logging.getLogger("streamglobe.superpeer")


@dataclass
class PlanCommitted:
    """What the peers answered to a plan's commit: where it starts, and who committed."""

    logged: dict[str, int]  # original -> items logged when its peer committed
    anchors: dict[str, int]  # stream -> the first parent item it took (``positions``)
    incarnations: dict[str, str]  # peer -> the process that committed (a later one lost the plan)
    replayed: dict[str, int] = field(default_factory=dict)  # original -> first log item replayed
    history: dict[str, str] = field(default_factory=dict)  # original -> how far back its history went
    peers: set[str] = field(default_factory=set)  # where it was committed: where it is to be removed


class PlanAgain(NodeError):
    """A commit was refused before any peer started a new stream of the plan — a replay's hold
    or a reservation lapsed: undone (``Coordinator.release``), the plan can be made again,
    without the running replays in ``avoid``."""

    def __init__(self, reason: str, avoid: frozenset[str]) -> None:
        super().__init__("FAILED_PRECONDITION", reason)
        self.avoid = avoid


class Coordinator:
    def __init__(self, state: PeerState, link: PeerLink) -> None:
        self.state = state
        self.link = link

    def reserve(self, plan: Plan, view: RemotePlanningView, since_s: float | None = None,
                ordered: bool = True) -> tuple[str, Reserved]:
        """Reserve on every peer the new streams pass (and here, and at the origin of each
        running replay a part is served from), each peer checking it is still as the plan read
        it. ``ordered``: one peer after the other, in one global order, so that of colliding
        installations one always wins; else all at once — one round trip instead of one per
        peer, but two colliding installations may each win a peer and both be refused (the
        caller plans again, then in order). Returns the transaction ("" if refused, after
        aborting what was reserved) and what the peers said (why not; for parts served from
        running replays, where the subscription starts). ``since_s``: a subscription over the
        last so many seconds (None: over everything retained, if it is over the past)."""
        txn = uuid.uuid4().hex
        attach = {new: {"copy": running, "since_s": since_s} for new, running in shared_replays(plan).items()}
        taking = set(self.affected(plan)) | self.holders(plan, view)
        kept = self.kept(plan, view)
        peers = sorted(taking | set(kept))

        def reserve_at(peer: str) -> Reserved:
            if peer in taking:
                return self.link.reserve(peer, txn, self.new_streams(plan), plan.subscription, plan.target,
                                         view.versions.get(peer), attach or None, pins=kept.get(peer))
            # (it only keeps what the plan reads through it: not reached, a conflict — it is
            # planned around once it is known to be down, or the stream is found gone)
            r = self.link.reserve(peer, txn, [], plan.subscription, plan.target, pins=kept[peer])
            r.reason = r.reason if r.ok or r.reason.startswith(CONFLICT) else f"{CONFLICT}{r.reason}"
            return r

        answers: list[Reserved | BaseException] = []
        if ordered:
            for peer in peers:
                try:
                    answers.append(reserve_at(peer))
                except BaseException as exc:  # noqa: BLE001 - aborted below, then raised
                    answers.append(exc)
                if isinstance(answers[-1], BaseException) or not answers[-1].ok:
                    break
        else:
            answers = in_parallel([lambda peer=peer: reserve_at(peer) for peer in peers])
        failed = next((a for a in answers if isinstance(a, BaseException)), None)
        if failed is not None:
            self._abort(peers[:len(answers)], txn)
            raise failed
        refusal = next(((peer, r) for peer, r in zip(peers, answers) if not r.ok), None)
        if refusal is not None:
            peer, r = refusal
            self._abort([p for p, a in zip(peers, answers) if a.ok], txn)
            return "", Reserved(False, f"{peer}: {r.reason}", refused=r.refused, at=peer)
        got = Reserved(True)
        for r in answers:
            got.starts.update(r.starts)
            got.replayed.update(r.replayed)
            got.history.update(r.history)
        missing = [spec["copy"] for new, spec in sorted(attach.items()) if new not in got.starts]
        if missing:  # (its origin no longer has it)
            self._abort(peers, txn)
            return "", Reserved(False, f"the replay filling {missing[0]} is over", refused=missing[0])
        return txn, got

    def _abort(self, peers: list[str], txn: str) -> None:
        for p in peers:
            self.link.abort(p, txn)

    def commit(self, txn: str, plan: Plan, view: RemotePlanningView,
               replay: dict[str, int] | None = None, since: dict[str, float] | None = None,
               held: list[str] | None = None) -> PlanCommitted:
        """Commit on the peers the plan touches, in waves: a peer starts sending a new stream
        only once every later peer of its route has installed it; a replay held for the plan
        is let go after all of them. ``replay``: new copies to fill from their stream's log (from
        the given item), streams and copies of a running replay to drop the items of below a
        number; ``since``: copies to fill from the items that arrived in the last so many
        seconds instead; ``held``: new count windows to install held (``count_handover``).
        Returns where the plan starts (``PlanCommitted``)."""
        chains = [s for p in plan.parts for s in view.lineage(p.reused)]
        lineage = sorted({s.id for s in chains})
        holders = self.holders(plan, view)
        # the originals' peers say where the subscription starts in each stream: required too
        required = set(self.affected(plan)) | {s.origin for s in chains if s.original} | holders
        done = PlanCommitted({}, {}, {})
        # Only a new stream's origin starts anything: the other peers commit first, so that a
        # refusal from them (a reused stream no longer there) comes before anything was sent. A replay's origin that holds it for the plan checks the hold is still
        # there (no item from where the new copy starts has passed) and keeps it past every
        # other peer's reservation: first of all, where no new stream passes it, else last.
        routed = {p for s in self.new_streams(plan) for p in s.route[1:]}
        origins = {s.route[0] for s in self.new_streams(plan)}
        first = holders - routed - origins
        last = holders - routed - first
        # The peers that start nothing commit together, then the origins, those farther from
        # here after those nearer (a stream's route only passes peers nearer here than its
        # origin); each wave waits for the one before.
        distance = view.snapshot.backbone.distances_to(self.state.id)
        waves: dict[tuple, list[str]] = {}
        for peer in self.commit_peers(self.affected(plan), lineage, view):
            done.peers.add(peer)
            wave = ((0,) if peer in first else (3,) if peer in last else
                    (2, distance.get(peer, len(distance))) if peer in origins else (1,))
            waves.setdefault(wave, []).append(peer)
        started = False  # (whether an origin has committed: a new stream may have started)
        for wave in sorted(waves):
            peers = waves[wave]
            answers = in_parallel([lambda peer=peer: self.link.commit(
                peer, txn, plan.subscription, lineage, required=peer in required, replay=replay, since=since,
                held=held) for peer in peers])
            for peer, committed in zip(peers, answers):
                if not isinstance(committed, BaseException):
                    done.logged.update(committed.starts)
                    done.replayed.update(committed.replayed)
                    done.history.update(committed.history)
                    done.anchors.update(committed.anchors)
                    done.incarnations[peer] = committed.incarnation
            for peer, exc in zip(peers, answers):
                if not isinstance(exc, BaseException):
                    continue
                if (isinstance(exc, NodeError) and peer not in origins and not started
                        and PLAN_AGAIN in exc.message):
                    replays = shared_replays(plan).values()  # (nothing has started yet)
                    raise PlanAgain(exc.message, frozenset(c for c in replays if peer in first
                                                           and view.snapshot.streams[c].origin == peer)) from exc
                raise exc
            started = started or bool(origins & set(peers))
        lapsed = [h for h in sorted(holders) if self.link.abort(h, txn)]  # (the replays held go on)
        if lapsed:  # (not silently: the new copy may have missed items)
            raise NodeError("ABORTED", f"the replay {lapsed[0]} held for this subscription was let go before "
                                       "every peer had installed the subscription's copy of it (the "
                                       "subscription it was running for was removed meanwhile, or the "
                                       "installation took longer than a reservation lasts): subscribe again")
        return done

    def release(self, record: SubscriptionRecord, txn: str, peers: set[str] | None = None) -> None:
        """Undo a half-done installation: the inputs here, reservations, committed streams — at
        ``peers`` (``involved``: every peer it may have reserved or committed at; None: every
        peer of the backbone)."""
        sid = record.plan.subscription if record.plan is not None else record.plan_id
        with self.state.lock:
            record.plan = None
            self.state.stop_delivering(record.runtime, record.inputs.values())
        self.remove_everywhere(sid, [sid], txn, peers)  # (best effort; the original error is reported)

    def involved(self, plan: Plan, view: RemotePlanningView) -> set[str]:
        """Every peer an installation of ``plan`` reserves or commits at: those its commit calls
        (``reached``) and those its reservation keeps streams at (``kept``)."""
        return self.reached(plan, view) | set(self.kept(plan, view))

    def remove_everywhere(self, sid: str, owners: list[str], txn: str = "",
                          peers: set[str] | None = None) -> list[str]:
        """The streams ``owners`` (plan ids of ``sid``) installed, removed at ``peers`` (where
        they were committed; None: not known, every peer) at once (one after the other, it took
        N-1 round trips per owner), and ``txn``'s reservations let go; the streams removed. A
        peer that fails is said in the log, the others still remove."""
        peers = sorted(peers | {self.state.id}) if peers is not None else list(self.state.backbone.peers)

        def at(peer: str) -> list[str]:
            if txn:
                self.link.abort(peer, txn)
            return [s for owner in owners for s in self.link.remove(peer, owner) or []]

        removed: list[str] = []
        for peer, answer in zip(peers, in_parallel([lambda peer=peer: at(peer) for peer in peers])):
            if isinstance(answer, BaseException):
                log.error("%s: removing the streams of %s at %s failed: %s", self.state.id, sid, peer, answer)
            else:
                removed.extend(answer)
        return removed

    def reached(self, plan: Plan, view: RemotePlanningView) -> set[str]:
        """Every peer a commit of ``plan`` calls: those taking its new streams, those holding a
        stream it reuses (they count it as a user) and the replays' origins."""
        lineage = sorted({s.id for p in plan.parts for s in view.lineage(p.reused)})
        return set(self.commit_peers(self.affected(plan), lineage, view)) | self.holders(plan, view)

    @staticmethod
    def new_streams(plan: Plan) -> list[NetworkStream]:
        return [s for p in plan.parts for s in p.new_streams]

    def affected(self, plan: Plan) -> list[str]:
        """The peers whose resources a plan takes: this one and every peer a new stream passes."""
        return sorted({self.state.id} | {p for s in self.new_streams(plan) for p in s.route})

    @staticmethod
    def kept(plan: Plan, view: RemotePlanningView) -> dict[str, list[str]]:
        """Peer -> the reused streams (and ancestors) the plan reads through it, to keep there
        until it commits: each as far along its route as the plan reads it — the reused one to
        where the part reads it, an ancestor to where its child is made. Originals stay anyway;
        the rest of a route may be cut back meanwhile, the plan does not read it."""
        kept: dict[str, set[str]] = {}
        for p in plan.parts:
            upto = p.reuse_peer
            for s in view.lineage(p.reused):
                if not s.original:
                    route = s.route[:s.route.index(upto) + 1] if upto in s.route else s.route
                    for peer in route:
                        kept.setdefault(peer, set()).add(s.id)
                upto = s.origin
        return {peer: sorted(ids) for peer, ids in kept.items()}

    @staticmethod
    def holders(plan: Plan, view: RemotePlanningView) -> set[str]:
        """The origins of the running replays the plan's parts are served from."""
        return {view.snapshot.streams[running].origin for running in shared_replays(plan).values()}

    def commit_peers(self, affected: list[str], lineage: list[str], view: RemotePlanningView) -> list[str]:
        """The peers a plan touches — those that reserved new streams and those holding a reused
        stream or an ancestor of it (they count the new user) — nearest this peer first. Every
        new stream's route is a shortest path to this peer, so along it the distance falls:
        a stream's later peers commit before its earlier ones."""
        touched = set(affected) | view.peers_holding(lineage)
        distance = view.snapshot.backbone.distances_to(self.state.id)  # the backbone planned on
        order = {p: i for i, p in enumerate(self.state.backbone.peers)}
        return sorted(touched, key=lambda p: (distance.get(p, len(order)), order.get(p, len(order))))
