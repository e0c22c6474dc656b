"""The participant side of the control plane: what a super-peer does when another one (or
itself) plans and installs a subscription.

* ``lookup`` / ``statistics``: the stream property table for an input, and the statistics of a
  stream registered here — what a planning peer fetches before it plans;
* ``reserve`` → ``commit`` | ``abort``: the two phases of an installation. A reservation checks
  this peer's load capacity and the bandwidth of its links against what is installed and what
  other transactions hold reserved (a stream crossing a link passes both its ends, so each end
  sees the link's load in both directions in its own table; the streams of one transaction on
  the same link are summed); reservations count in the usage this peer reports, so planners
  elsewhere see them. Commit adds the streams to the table, installs their operators on the
  executor, ends at once a new stream whose parent's end already passed here (``attach``), and
  makes the subscription a user of the reused streams (and their ancestors) present here;
* ``remove`` / ``truncate``: unsubscribe releases what nothing uses any more, and a route that
  now ends at a peer that does not need the stream is cut back one peer at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sharing.properties import InputStream
from sharing.serialization import statistics_to_json
from sharing.stream_table import NetworkStream, link_load, usage_at

from .announcements import find_original
from ..data.network_joins import NetworkJoins, band_join_of
from ..data.positions import StreamPositions
from ..errors import NodeError
from ..executors import Executor
from ..history.log_replay import LogReplays
from ..peer_state import PeerState
from .peer_link import PeerLink, Reserved
from .transactions import Transaction
from .widening_in_place import InPlaceWidening
from ..security.audit import deny
from ..subscriptions.record import replaced_by

CONFLICT = "conflict: "  # how a refusal that calls for planning again (not a full peer) begins
PLAN_AGAIN = ": plan again"  # how a commit refused for a lapsed reservation or hold ends


class Participant:
    def __init__(self, state: PeerState, executor: Executor, link: PeerLink, positions: StreamPositions,
                 replays: LogReplays, attach: Callable[[str], None],
                 replay: Callable[[str, int, float | None], tuple[int, str]], removed: Callable[[str], None],
                 background: bool = True, widening: InPlaceWidening | None = None,
                 joins: NetworkJoins | None = None) -> None:
        """``positions``: where original streams' items stand here; ``replays``: the running
        replays of the streams registered here, to hold. From the data plane, called with the
        lock held: ``attach`` a stream installed here, ``replay`` a new copy from its stream's
        log, ``removed`` a stream (its queued items are dropped). ``background``: routes are cut
        in a thread of their own (else before ``remove`` returns)."""
        self.state = state
        self.executor = executor
        self.link = link
        self.positions = positions
        self.replays = replays
        self.attach = attach
        self.replay = replay
        self.removed = removed
        self.background = background
        self.transactions = state.transactions
        self.transactions.on_lapse = self.unpin
        self.widening = widening or InPlaceWidening(state, executor)  # (streams held while widened in place)
        self.joins = joins  # (joins placed here; None: this peer's executor does not run them)

    # ------------------------------------------------------------------ planning reads

    def lookup(self, input_stream: InputStream) -> tuple[list[NetworkStream], dict]:
        """The streams of an input here and this peer's usage (reservations included), with
        the version they were read at: a reservation for a plan made over an older version
        is refused as stale; and the number of the next item here of each copy filled from the
        past (``reached``: whether its replayed items have all passed, ``planner.live_at``)."""
        with self.state.lock:
            usage = self.state.usage_report()  # (with the version it was read at)
            streams = self.state.local_streams(input_stream)
            usage["reached"] = {s.id: self.positions.next[s.id] for s in streams  # (copies filled from the past)
                                if s.past and not s.operators and s.id in self.positions.next}
            return streams, usage

    def statistics(self, name: str, sample_of: int = 0) -> dict:
        """``sample_of``: the sample the caller holds (``statistics_to_json``)."""
        state = self.state.originals.get(name)
        if state is None:
            raise NodeError("NOT_FOUND", f'stream "{name}" is not registered at {self.state.id}')
        with self.state.lock:
            return {**statistics_to_json(state.statistics, sample_of=sample_of), "closed": state.closed}

    # ------------------------------------------------------------------ two phases

    def reserve(self, txn: str, streams: list[NetworkStream], subscription: str,
                target: str, version: int | None = None, coordinator: str | None = None,
                pins: list[str] | None = None) -> tuple[bool, str]:
        """Hold the resources ``streams`` take here for ``txn``. Refused as a *conflict*
        (``CONFLICT``: plan again, it is nobody's fault) when this peer changed since the plan
        read it at ``version``, or while another installation of the same input is in flight
        here — it may create the very stream this plan would then duplicate; refused for
        capacity when the streams do not fit. Streams that only earlier plans of the same
        subscription use (``sid``, ``sid~xxxxxx``: it is being planned again, ``recovery.replanning``) do
        not count: they are removed once the new plan is in.

        ``pins``: the streams the plan reuses (or their ancestors) that it read here — kept here
        until the transaction ends (``Transactions``); refused as a conflict if one is gone
        already (its last user left since the plan read it). A peer only asked to keep streams
        (no new stream passes it) checks nothing else."""
        here = self.state.id
        backbone = self.state.backbone
        for name in {s.input.stream for s in streams} - set(self.state.known_originals):
            find_original(self.state, self.link, name)  # (from its catalogue homes)
        why = self.malformed(streams) or self.unplaceable(streams)
        if why:
            raise deny(subscription, "Reserve", f"{here} refuses the plan of {subscription}: {why}", "INVALID_ARGUMENT")
        unknown = [s.input.stream for s in streams if s.input.stream not in self.state.known_originals]
        if unknown:  # (its homes do not know it yet either)
            return False, f'{CONFLICT}{here} does not know stream "{unknown[0]}" yet'
        with self.state.lock:
            gone = [sid for sid in pins or () if sid not in self.state.table]
            if gone:
                return False, f"{CONFLICT}{gone[0]}, which the plan reuses, was removed at {here} since"
            held = self.widening.refusal(txn, pins or [], streams)
            if held:  # (its properties are about to change: a plan made over them now is stale)
                return False, f"{CONFLICT}{held}"
            if not streams:  # (only keeping what the plan reuses: it takes nothing here)
                self.pin(txn, coordinator, subscription, pins or [])
                return True, ""
            if version is not None and version != self.state.version:
                return False, f"{CONFLICT}{here} changed since the plan was made"
            inputs = {s.input for s in streams}
            pending = self.transactions.reserved()
            if any(s.input in inputs for s in pending):
                return False, f"{CONFLICT}another installation of the same stream is in flight at {here}"
            # what is installed here and what other transactions hold reserved here
            held = [*(s for s in self.state.table if not replaced_by(s, subscription)), *pending]
            load = usage_at(here, held).load + usage_at(here, streams).load
            capacity = backbone.peers[here].load_capacity
            if load > capacity * (1 + 1e-9):
                return False, f"{here} would need {100 * load / capacity:.1f}% of its load capacity"
            # links in both directions, every stream of this transaction summed per link
            used = link_load(here, held)
            for n, bits in sorted(link_load(here, streams).items()):
                bw = backbone.links[frozenset((here, n))].bandwidth
                need = used.get(n, 0.0) + bits
                if need > bw * (1 + 1e-9):
                    return False, f"link {here}–{n} would need {100 * need / bw:.1f}% of its bandwidth"
            self.pin(txn, coordinator, subscription, pins or [], streams)
        return True, ""

    def pin(self, txn: str, coordinator: str | None, subscription: str, pins: list[str],
            streams: list[NetworkStream] = ()) -> None:
        """Open ``txn`` here: ``streams`` reserved, the ``pins`` kept by making the subscription
        their user. Called with the lock held, every pinned stream present."""
        added = [sid for sid in pins if subscription not in self.state.table.get(sid).users]
        for sid in added:
            self.state.table.get(sid).users.add(subscription)
        self.transactions.reserve(txn, streams, coordinator, subscription, pins, added)

    def unpin(self, t: Transaction) -> None:
        """``t`` ended uncommitted: the streams it kept lose the user it gave them, and those
        left without one are removed (as ``remove`` does)."""
        with self.state.lock:
            added, t.added = t.added, []
            for sid in added:
                entry = self.state.table.get(sid)
                if entry is None:
                    continue
                entry.users.discard(t.subscription)
                if not entry.users and not entry.original:
                    self.state.table.discard(sid)
                    self.executor.remove(sid)
                    self.removed(sid)
        self._cut_tails_later()  # (a tail it kept may be needed no more)

    def reserve_with_replays(self, txn: str, streams: list[NetworkStream], subscription: str, target: str,
                             version: int | None = None, attach: dict | None = None,
                             coordinator: str | None = None, pins: list[str] | None = None) -> Reserved:
        """``reserve``; and for a past subscription served from running replays of streams
        registered here (``attach``: new copy -> {"copy": the running copy, "since_s"}), where
        it starts in each — the replay held before that item until ``txn`` ends here
        (``log_replay``). A replay that cannot serve it refuses the reservation, naming the
        running copy (``Reserved.refused``: plan again without it)."""
        ok, why = self.reserve(txn, streams, subscription, target, version, coordinator, pins)
        if not ok or not attach:
            return Reserved(ok, why)
        got = Reserved(True)
        with self.state.lock:
            try:
                for new, spec in sorted(attach.items()):
                    running = self.state.table.get(spec["copy"])
                    if running is None or running.origin != self.state.id:
                        continue  # (another peer's replay)
                    why, start, note = self.replays.hold_since(running.id, txn, spec["since_s"])
                    if why:
                        self.abort(txn)
                        return Reserved(False, f"{self.state.id}: {why}", refused=running.id)
                    got.starts[new] = start
                    got.replayed[running.parent] = start
                    got.history.update({running.parent: note} if note else {})
            except BaseException:  # (reading the history failed): nothing stays held
                self.abort(txn)
                raise
        return got

    def commit(self, txn: str, subscription: str, lineage: list[str],
               replay: dict[str, int] | None = None, since: dict[str, float] | None = None,
               aligned_later: list[str] | None = None) -> dict[str, dict]:
        """``replay``: new copies of a stream registered here to fill from its log, from the
        given item on, before any new item (a subscription over the past, or planned again
        after a failure); ``since``: those of them to fill from the first item that arrived
        that many seconds ago instead (``subscribe --since``). ``replayed``, in the answer: the
        first log item each replay starts at, per stream registered here; ``history.bounds``: what a
        subscriber asking for more than is retained should be told (``retention``).

        Returns where the subscription starts (what a later replay starts from): ``anchors``,
        the first parent item (``positions``) of each stream made here that the plan installs
        on a stream already flowing here, and of each stream of its ``lineage`` made here;
        ``logged``, per stream registered here that the plan reads, the items logged so far
        (late by the items in flight: for where no anchor is known).

        ``aligned_later``: new count windows made here to install held, until the subscription's peer
        aligns them with the windows they take over (``count_handover``)."""
        here = self.state.id
        with self.state.lock:
            pending = self.transactions.get(txn)
            made_here = [s.id for s in (pending.streams if pending is not None else ())
                         if s.id in (aligned_later or ()) and s.origin == here]
            if made_here and not self.executor.aligns_count_windows:  # (only where the held window is made)
                raise NodeError("FAILED_PRECONDITION", f"the {self.executor.name} executor at {here} cannot align "
                                                       f"a count window with another one's ({made_here[0]})")
            if self.transactions.is_expired(txn):  # (refused, not committed empty)
                raise NodeError("FAILED_PRECONDITION", f"the reservation {txn} expired at {here} "
                                                       f"before it was committed{PLAN_AGAIN}")
            cut = [sid for sid in (pending.pinned if pending is not None else ()) if sid not in self.state.table]
            if cut:  # (its route was being cut back here as it was kept: nothing would reach it)
                self.abort(txn)
                raise NodeError("FAILED_PRECONDITION", f"{cut[0]}, which the plan reuses, no longer reaches "
                                                       f"{here}{PLAN_AGAIN}")
            lost = self.transactions.lost_replays(txn)
            if lost:  # (the replay was removed): the new copy would miss items
                self.abort(txn)
                raise NodeError("FAILED_PRECONDITION", f"the replay filling {lost[0]} at {here} is no longer "
                                                       f"held for this subscription{PLAN_AGAIN}")
            if self.transactions.held_by(txn):  # (checked; the coordinator's abort lets the replays go)
                self.transactions.renew(txn)  # (they outlast every reservation the plan still commits)
            installed = []
            kept = pending.pinned if pending is not None else []
            held = self.transactions.commit(txn)  # (a replay held for it waits for the abort that ends it)
            anchors = self._anchors(held, lineage)
            for s in held:
                s.users.add(subscription)
                if here in s.route:
                    self.state.table.add(s)
                if s.origin == here and s.parent is not None and self.joins is not None and band_join_of(s):
                    self.joins.install(s)  # (a join placed here: a reader of both its inputs)
                elif s.origin == here and s.parent is not None:
                    parent = self.state.table.get(s.parent)
                    kind = parent.kind if parent is not None else "items"
                    if aligned_later and s.id in aligned_later:
                        self.executor.install(s.id, s.operators, s.parent, kind, held=True)
                    else:
                        self.executor.install(s.id, s.operators, s.parent, kind)
                    installed.append(s.id)
            # A parent whose end already passed here will not end again: nor would the new
            # streams computed from it, unless they are ended now (the lock keeps items out).
            replayed: dict[str, int] = {}
            notes: dict[str, str] = {}
            for sid in installed:
                if replay and sid in replay:
                    parent = self.state.table.get(sid).parent
                    start, note = self.replay(sid, replay[sid], (since or {}).get(sid))
                    if parent in self.state.originals:  # (not a level of a recomputed chain)
                        replayed[parent] = start
                        notes.update({parent: note} if note else {})
                self.attach(sid)
            # the reused streams and their ancestors present here gain the subscription as a user
            for sid in lineage:
                entry = self.state.table.get(sid)
                if entry is not None:
                    entry.users.add(subscription)
            read = set(lineage) | {self.state.table.get(sid).parent for sid in installed}
            logged = {name: o.logged for name, o in self.state.originals.items() if name in read}
            if any(self.state.unneeded_tail(s) for s in map(self.state.table.get, kept) if s is not None):
                self._cut_tails_later()  # (kept for the plan, which reads it elsewhere)
            shares = self.replays.held(txn)  # (a running replay it shares)
            if logged:  # kept until the subscriber's peer reports its own pins (``history.bounds``)
                self.state.commit_pins[subscription] = (  # (a replay starts at or before the log's end)
                    time.time(), {n: min(at, replayed.get(n, at), shares.get(n, at)) for n, at in logged.items()})
            return {"anchors": anchors, "replayed": replayed, "history": notes,
                    "logged": logged}

    def _anchors(self, streams: list[NetworkStream], lineage: list[str]) -> dict[str, int]:
        """Called with the lock held, before the new streams take any item."""
        new = {s.id for s in streams}
        anchors: dict[str, int] = {}
        for s in streams:
            if s.origin == self.state.id and s.parent is not None:
                original = self.state.originals.get(s.parent)
                at = self.positions.anchor(s.id, s.parent, original.logged if original is not None else None)
                if at is not None and s.parent not in new:
                    anchors[s.id] = at
        for sid in lineage:
            if sid in self.positions.anchors:
                anchors[sid] = self.positions.anchors[sid]
        return anchors

    def malformed(self, streams: list[NetworkStream]) -> str:
        """Why a plan's streams cannot be genuine ("" if they can): a plan only derives new
        streams from registered ones, along loop-free routes on the backbone's links, each
        starting where the stream is made, under ids no stream has."""
        links = self.state.backbone.links
        with self.state.lock:
            for s in streams:
                known = self.state.known_originals.get(s.input.stream)
                if s.original or s.parent is None:
                    return f"{s.id} would be a new original stream: only registering a stream makes one"
                if known is not None and known.input != s.input:
                    return f'{s.id} reads stream "{s.input.stream}", which is not registered with that shape'
                if s.id in self.state.table or s.id in self.state.known_originals:
                    return f"a stream {s.id} exists already"
                if not s.route or s.route[0] != s.origin:
                    return f"{s.id}'s route does not start where it is made ({s.origin})"
                if len(set(s.route)) != len(s.route):
                    return f"{s.id}'s route {'→'.join(s.route)} visits a peer twice"
                for a, b in zip(s.route, s.route[1:]):
                    if frozenset((a, b)) not in links:
                        return f"{s.id}'s route {'→'.join(s.route)} uses {a}–{b}, which is not a link"
        return ""

    def unplaceable(self, streams: list[NetworkStream]) -> str:
        """Why a join the plan places here cannot run here ("" if it can)."""
        joins = [s.id for s in streams if s.origin == self.state.id and band_join_of(s)]
        if joins and self.joins is None:
            return (f"{joins[0]} joins two streams at {self.state.id}, which does not run joins placed in the "
                    "network (it was started with --no-network-joins)")
        return ""

    def abort(self, txn: str) -> bool:
        """End ``txn`` here: what it reserved, and the replays it held (also after its commit:
        the coordinator lets them go once every peer has committed). Returns whether a replay
        it held had been let go before (removed with the subscription it served, or the hold
        lapsed): items may then have passed a new copy's peer before the copy was there."""
        with self.state.lock:
            ended = self.transactions.end(txn)
            if ended is not None and ended.pinned:
                self.unpin(ended)
            return ended is not None and bool(ended.lapsed)

    # ------------------------------------------------------------------ removal

    def remove(self, subscription: str) -> list[str]:
        with self.state.lock:
            self.state.commit_pins.pop(subscription, None)
            removed = self.state.table.release(subscription)
            for s in removed:
                self.executor.remove(s.id)
                self.removed(s.id)
        self._cut_tails_later()
        return [s.id for s in removed]

    def _cut_tails_later(self) -> None:
        if self.background:
            threading.Thread(target=self.cut_tails, daemon=True).start()
        else:
            self.cut_tails()

    def cut_tails(self) -> None:
        """Tell the route of every stream this peer no longer needs to end one peer earlier."""
        with self.state.lock:
            tails = [s for s in self.state.table if self.state.unneeded_tail(s)]
        for s in tails:
            previous = s.route[-2]
            for peer in dict.fromkeys(s.route):
                self.link.truncate(peer, s.id, previous)

    def truncate(self, stream: str, last: str) -> None:
        with self.state.lock:
            route = self.state.table.truncate(stream, last)
            if route is None:
                return
            if self.state.id not in route:
                self.state.table.discard(stream)
                self.removed(stream)
                return
            s = self.state.table.get(stream)
            again = s is not None and self.state.unneeded_tail(s)
        if again:
            self.cut_tails()

