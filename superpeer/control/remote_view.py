"""The planning view of a super-peer: everything the planner may read, fetched before it runs.

SUBSCRIBE searches breadth-first from each input's registering peer through the peers its
matching streams reach (DESIGN.md §5). Rather than letting the planner call peers as it goes
(which would put gRPC inside ``sharing/`` and make planning time depend on the slowest answer
inside the search), the control plane asks *every* peer of the backbone for its table of the
subscription's inputs, in parallel, and the statistics of each original stream from the peer it
is registered at; the planner then runs over the resulting ``PlanningSnapshot``. On backbones of
tens of peers that is one round of parallel calls, no slower than the sequential visits it
replaces. A peer that does not answer contributes an empty table: it offers nothing to reuse.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from sharing.backbone import Backbone
from sharing.matching import match_properties
from sharing.planner import Planner
from sharing.planning_view import PlanningSnapshot
from sharing.properties import InputProperties, InputStream, Properties
from sharing.repetition import UNKNOWN, Repetition
from sharing.serialization import statistics_from_json
from sharing.statistics import StreamEstimate, StreamStatistics
from sharing.stream_table import NetworkStream, lineage
from sharing.subnet_planning import SubnetPlanner
from sharing.subnets import Subnets

from ..errors import NodeError
from ..peer_state import PeerState
from .in_flight import holds_any, settled
from .peer_link import STATISTICS, PeerLink, copy_stream

# Lookups at other peers run in parallel on threads kept for the process, not started anew for
# every plan. Enough of them that the lookups of concurrent plans (a registration, a round, a
# failure's re-plan) at unreachable peers, each waiting for its timeout, do not hold up the others.
LOOKUP_THREADS = 64
T = TypeVar("T")
_lookups: ThreadPoolExecutor | None = None
_lookups_lock = threading.Lock()


@dataclass
class _Done:
    answer: object

    def result(self) -> object:
        return self.answer


def _lookup_pool() -> ThreadPoolExecutor:
    global _lookups
    with _lookups_lock:
        if _lookups is None:
            _lookups = ThreadPoolExecutor(LOOKUP_THREADS, thread_name_prefix="lookup")
        return _lookups


def in_parallel(calls: list[Callable[[], T]]) -> list[T | BaseException]:
    """Each call's answer or what it raised, in order: the first in this thread, the others
    meanwhile on the lookup threads (one call alone is no hand-off to a thread and back)."""
    futures = [_lookup_pool().submit(call) for call in calls[1:]]
    answers = [*calls[:1], *(f.result for f in futures)]
    out: list[T | BaseException] = []
    for answer in answers:
        try:
            out.append(answer())
        except BaseException as exc:  # noqa: BLE001 - given back, the caller decides
            out.append(exc)
    return out


@dataclass
class RemotePlanningView:
    """A snapshot for the planner, and what the control plane needs next to it."""

    snapshot: PlanningSnapshot
    holders: dict[str, set[str]] = field(default_factory=dict)  # stream id -> peers reporting it
    versions: dict[str, int] = field(default_factory=dict)  # peer -> version its answer was read at
    # peer -> the usage report the plan is admitted or refused against: an asked peer's from
    # its answer (its oldest, as ``versions``), read with its table; the others' as last heard.
    # Not the peer state's latest: other threads' lookups replace those meanwhile, and usage
    # read after a commit with a table read before it counts a stream the plan cannot reuse.
    reports: dict[str, dict] = field(default_factory=dict)
    # peers the input's streams reach that a search of only what serves did not ask: a plan
    # refused over such a view is made again over every peer (``ControlPlane._reserve``)
    skipped: frozenset[str] = frozenset()

    def lineage(self, stream_id: str) -> list[NetworkStream]:
        """A reused stream and its ancestors (each parent is in its origin's table)."""
        return lineage(self.snapshot.streams, stream_id)

    def peers_holding(self, stream_ids: list[str]) -> set[str]:
        """Peers whose tables hold any of these streams: the route of each, and whoever
        reported it (a route being cut back may still be longer at some peer)."""
        peers: set[str] = set()
        for sid in stream_ids:
            peers |= self.holders.get(sid, set())
            s = self.snapshot.streams.get(sid)
            if s is not None:
                peers.update(s.route)
        return peers


def fetch_planning_view(state: PeerState, link: PeerLink, properties: Properties,
                        new_stream_id: Callable[[], str], backbone: Backbone | None = None,
                        tables: bool = True, scoped: bool = False, serving: bool = False) -> RemotePlanningView:
    """Fetch statistics, originals and every peer's table for the inputs of ``properties``.
    ``backbone``: the part of the backbone to plan on (what remains around a failure);
    without ``tables`` no peer is asked what it has (a plan that reuses nothing). ``scoped``:
    only the peers the inputs' streams reach are asked, found breadth-first from each
    original's peer and this one (SUBSCRIBE's search itself): every stream of an original is
    computed at a peer its parent passes, so no other peer has one (re-optimisation rounds ask
    this way: their cost does not grow with the backbone). The peers an input's streams reached
    at the last such lookup here are asked in the first wave with those two: the search then
    usually ends after it, instead of one round trip per level of the streams' tree.

    ``serving`` (with ``scoped``): as SUBSCRIBE's search itself, only the streams that can serve
    an input (``match_properties``) and their ancestors are followed — a peer that only streams
    the planner would pass over reach is not asked (it never reads that peer's table; its usage
    is as last heard, as for any peer no stream of the input reaches). The first wave is then
    the peers of the streams seen at the last lookup here that serve (``lookup_seen``). For a
    registration's planner only: one that widens a near miss, plans inside subnets, plans a
    past or plans an approximate subscription on a sample of its input (a sampled stream serves
    the sample, not the input) needs more than what serves."""
    snapshot = PlanningSnapshot(backbone or state.backbone, new_stream_id)
    view = RemotePlanningView(snapshot)
    knowns: dict[str, tuple[InputStream, NetworkStream]] = {}
    for inp in properties.inputs:
        known = state.known_originals.get(inp.input.stream)
        if known is not None and known.input == inp.input:
            knowns.setdefault(known.id, (inp.input, known))
        # (else unknown, or other items: the planner refuses it with the reason)
    peers = snapshot.backbone.peers
    if scoped:  # (and at once the peers the input's streams reached at its last lookup here)
        guess = _serving(properties, state.statistics_held) if serving else None
        asks = [(p, inp) for inp, known in knowns.values()
                for p in sorted({known.origin, state.id} | (
                    _reach(state.lookup_seen.get(inp, {}), guess) if guess is not None
                    else state.lookup_reach.get(inp, frozenset())))
                if p in peers]
    else:
        asks = [(peer, inp) for inp, _ in knowns.values() for peer in peers] if tables else []
    # (the sample it holds from an earlier answer is not sent again: only the counters; the
    # statistics held are read once, as another plan may store newer ones meanwhile)
    held_now = {known.id: state.statistics_held.get(known.id) for _, known in knowns.values()}
    held_samples = {sid: held.sample_id if held is not None else 0 for sid, held in held_now.items()}
    # the first peers are asked at once; an original's peer answers with its statistics too
    with_stats = {(known.origin, inp): held_samples[known.id] for inp, known in knowns.values()
                  if known.origin != state.id}
    pending = {a: _lookup_pool().submit(link.lookup, *a, statistics_of=with_stats.get(a))
               for a in asks if a[0] != state.id}
    for inp, known in knowns.values():
        asked = pending.get((known.origin, inp))
        answer = asked.result() if asked is not None else None
        if asked is not None and answer is None:  # (not asked again: that would wait as long once more)
            raise NodeError("UNAVAILABLE", f"super-peer {known.origin}, where \"{known.id}\" is registered, "
                                           "is unreachable")
        data = answer[1].pop(STATISTICS, None) if answer is not None else None
        if data is None:  # (its peer is this one, was not asked, or did not answer with them)
            data = link.statistics(known.origin, known.id, held_samples[known.id])
        stats = state.statistics_held[known.id] = statistics_from_json(data, held_now[known.id])
        if stats.frequency <= 0:
            stats.frequency = 1.0  # nothing observed yet: assume a slow stream
        snapshot.statistics[known.id] = stats
        original = copy_stream(known)
        original.estimate = StreamEstimate(stats.frequency, stats.avg_item_size)
        snapshot.originals[known.id] = original
        snapshot.streams[original.id] = original
    asked: set[tuple[str, InputStream]] = set()
    seen: dict[InputStream, dict[str, Seen]] = {inp: {} for inp, _ in knowns.values()}
    follows = _serving(properties, snapshot.statistics) if serving else None
    while asks:
        asked.update(asks)
        answers = _ask(state, link, asks, pending)
        pending = {}
        for (peer, inp), answer in zip(asks, answers):
            if answer is not None and scoped:
                for s in answer[0]:  # (a route being cut back may be longer at some peer: all of it)
                    was = seen[inp].get(s.id)
                    peers_of = frozenset((s.origin, *s.route))
                    seen[inp][s.id] = Seen(s.properties, s.parent, peers_of | was.peers if was else peers_of)
        _take_answers(state, view, asks, answers)
        reached = {(p, inp) for inp, streams in seen.items() for p in _reach(streams, follows) if p in peers}
        asks = sorted(reached - asked, key=lambda a: (a[0], a[1].stream)) if scoped else []
    if serving:
        view.skipped = frozenset(p for streams in seen.values() for p in _reach(streams, None)
                                 if p in peers) - {p for p, _ in asked}
    if scoped and backbone is None:  # (a search around a failure, over part of the backbone, keeps it)
        for inp, streams in seen.items():
            state.lookup_reach[inp] = frozenset(p for p in _reach(streams, None) if p in peers)
            # (a stream seen before at peers not asked now is kept; one an asked peer no longer has, not)
            there = {p for p, i in asked if i == inp}
            state.lookup_seen[inp] = {**{sid: old for sid, old in state.lookup_seen.get(inp, {}).items()
                                         if not old.peers & there}, **streams}
    view.reports = {**state.peer_usage, **view.reports}  # (this peer's from its own lookup, if asked)
    if state.id not in view.reports:
        view.reports[state.id] = state.usage_report()
    snapshot.link_used, snapshot.peer_used = state.usage_view(view.reports)
    snapshot.staying = state.staying_view()
    snapshot.join_peers = frozenset(p for p, r in view.reports.items() if r.get("joins"))  # (``join_planning``)
    return view


@dataclass(frozen=True)
class Seen:
    """A stream of an input as a lookup here saw it: enough to tell whom to ask for it."""

    properties: InputProperties
    parent: str | None
    peers: frozenset[str]  # its origin and route


def _serving(properties: Properties, statistics: Mapping[str, StreamStatistics]
             ) -> Callable[[InputProperties], bool]:
    """Whether a stream's properties can serve one of the inputs of ``properties`` (as the
    planner matches them: with what the statistics have seen of repeated elements)."""
    wanted: dict[InputStream, list[tuple]] = {}
    for inp in properties.inputs:
        stats = statistics.get(inp.input.stream)
        repetition = Repetition(stats.single_elements) if stats is not None else UNKNOWN
        wanted.setdefault(inp.input, []).append((inp, repetition))

    known: dict[int, tuple[InputProperties, bool]] = {}  # (streams of one group share their properties)

    def serves(stream_properties: InputProperties) -> bool:
        hit = known.get(id(stream_properties))
        if hit is None:
            hit = known[id(stream_properties)] = (stream_properties, any(
                match_properties(stream_properties, inp, repetition).shareable
                for inp, repetition in wanted.get(stream_properties.input, ())))
        return hit[1]
    return serves


def _reach(streams: Mapping[str, Seen], serves: Callable[[InputProperties], bool] | None) -> set[str]:
    """The peers ``streams`` reach: of every stream (``serves`` None), or only of those that
    serve and their ancestors (whose tables hold each child's parent: ``view.lineage``)."""
    if serves is None:
        return {p for s in streams.values() for p in s.peers}
    followed: set[str] = set()
    for sid, s in streams.items():
        if sid in followed or not serves(s.properties):
            continue
        while sid is not None and sid in streams and sid not in followed:  # (and its ancestors)
            followed.add(sid)
            sid = streams[sid].parent
    return {p for sid in followed for p in streams[sid].peers}


def _ask(state: PeerState, link: PeerLink, asks: list[tuple[str, InputStream]], pending: dict) -> list:
    """Every peer's answer to a lookup (None: unreachable): this peer's own here, the others'
    meanwhile on the lookup threads — or here too when there is one (no hand-off to a thread
    and back) — ``pending`` the lookups already asked."""
    others = [a for a in asks if a[0] != state.id and a not in pending]
    if len(others) == 1 and not pending:
        pending = {others[0]: _Done(link.lookup(*others[0]))}
    else:
        pending = {**pending, **{a: _lookup_pool().submit(link.lookup, *a) for a in others}}
    own = {a: link.lookup(*a) for a in asks if a[0] == state.id}
    return [own[a] if a in own else pending[a].result() for a in asks]


def _take_answers(state: PeerState, view: RemotePlanningView, asks: list, answers: list) -> None:
    snapshot = view.snapshot
    if asks:
        for (peer, inp), answer in zip(asks, answers):
            if answer is None:
                continue  # unreachable: nothing to reuse there
            found, usage = answer
            reached = usage.pop("reached", None)
            if peer != state.id:
                state.peer_usage[peer] = usage
            if "version" in usage:  # the oldest read of a peer decides whether a plan is stale
                view.versions[peer] = min(view.versions.get(peer, usage["version"]), usage["version"])
            if peer not in view.reports or usage.get("version", 0) < view.reports[peer].get("version", 0):
                view.reports[peer] = usage
            snapshot.add_table(peer, inp, found, reached)
            for s in found:
                view.holders.setdefault(s.id, set()).add(peer)


def remember_reach(state: PeerState, parts) -> None:
    """A plan just installed here: the peers its new streams pass hold streams of its inputs
    now, to be asked in the first wave of the next lookup (``fetch_planning_view``)."""
    for part in parts:
        inp = part.input_properties.input
        passed = {p for s in part.new_streams for p in (s.origin, *s.route)}
        state.lookup_reach[inp] = state.lookup_reach.get(inp, frozenset()) | passed
        state.lookup_seen[inp] = {**state.lookup_seen.get(inp, {}), **{
            s.id: Seen(s.properties, s.parent, frozenset((s.origin, *s.route))) for s in part.new_streams}}


def settled_view(state: PeerState, view: RemotePlanningView) -> RemotePlanningView | None:
    """``view`` with the usage its reports give once what in-flight installations hold at the
    peers asked for it is let go (None: they hold nothing). Only those: the others' reports
    are as last heard — a peer down keeps its last one, whatever it held then. Tables and
    statistics as they are: a plan over it is only asked whether it fits."""
    asked = view.versions.keys()  # (this peer's own lookup too)
    if not holds_any(view.reports, asked):
        return None
    reports = settled(view.reports, asked)
    snapshot = dataclasses.replace(view.snapshot)
    snapshot.link_used, snapshot.peer_used = state.usage_view(reports)
    return dataclasses.replace(view, snapshot=snapshot, reports=reports)


def planner_for(view: RemotePlanningView, subnets: Subnets | None, widening: bool = False) -> Planner | SubnetPlanner:
    """SUBSCRIBE over the view: inside the subscriber's subnet when the topology declares
    subnets (``sharing.subnet_planning``: an original of another subnet enters by a relay; no
    widening there), else over the whole backbone."""
    if subnets is None:
        return Planner(view.snapshot, widening=widening)
    return SubnetPlanner(view.snapshot, subnets)
