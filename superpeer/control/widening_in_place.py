"""A running stream widened in place, at each peer of its route (issue 31; ``sharing.widening``).

The coordinator — the super-peer of the subscription that nearly matched the stream ``S`` —
widens ``S`` in three steps, in this order, then commits its own plan, which reads ``S`` wide:

1. ``narrow`` at every peer of ``S``'s route but its origin: what reads ``S`` there gets the
   residual in front of it (``data.narrowing``). ``S`` is **held** there: no other plan may reuse
   it or compute from it until step 3 says what it is now (a plan made over its narrow
   properties would read wide items as narrow ones).
2. ``switch`` at ``S``'s origin: the same for what reads ``S`` there, then, under the same lock,
   the operators computing ``S`` are replaced by the wider ones: every item from then on is wide.
3. ``settle`` at the other peers: ``S``'s entry takes its new properties, and it is reusable again.

Each step bumps the peer's table version, so a plan made over the narrow ``S`` is refused when it
reserves. A step is refused — the coordinator then plans without widening — where ``S`` is not
as the plan saw it, where another installation in flight reuses ``S`` or computes from it, where
something reads ``S`` that a residual cannot be put in front of (a sample, a copy, a move in
progress), or on an executor that cannot change a running chain (Spark). A coordinator that
stops between steps 2 and 3 leaves ``S`` held where it did not settle: its readers stay exact,
and new plans there do not reuse it (safe; sharing is lost until the stream is removed).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from sharing.matching import match_properties
from sharing.stream_table import NetworkStream
from sharing.plans import InPlace
from wxquery.operators import definitions as alg

from ..data.narrowing import NarrowedDelivery, residual_chain
from ..errors import NodeError
from ..executors import Executor
from ..peer_state import PeerState
from .peer_link import PeerLink
from .remote_view import in_parallel

log = logging.getLogger("streamglobe.superpeer")
STEPS = ("narrow", "switch", "settle")


class InPlaceWidening:
    """A participant's part: what it does at each step, and which streams it holds."""

    def __init__(self, state: PeerState, executor: Executor) -> None:
        self.state = state
        self.executor = executor
        self.held = state.held_for_widening  # stream -> the transaction widening it (until ``settle``)

    def refusal(self, txn: str, pins: list[str], streams: list[NetworkStream]) -> str:
        """Why a reservation of ``txn`` must wait ("" if it need not): it reuses a held stream or
        computes from one (called with the lock held)."""
        for sid, holder in self.held.items():
            if holder != txn and (sid in pins or any(s.parent == sid for s in streams)):
                return f"{sid} is being widened at {self.state.id}"
        return ""

    def step(self, txn: str, step: str, wide: NetworkStream, was: NetworkStream) -> None:
        """``wide``: the stream's entry once widened (its id, new properties, operators, usage
        and estimate); ``was``: as the coordinator's plan saw it. The residual is worked out
        here, from the entry as it is and the wide properties: a stream that the wide one does
        not serve by selections and projections alone is refused."""
        if step not in STEPS:
            raise NodeError("INVALID_ARGUMENT", f"no widening step {step!r}")
        with self.state.lock:
            entry = self.state.table.get(wide.id)
            if entry is None:
                raise NodeError("FAILED_PRECONDITION", f"{wide.id} no longer reaches {self.state.id}")
            if (wide.input, wide.kind, wide.origin, wide.parent) != (entry.input, entry.kind, entry.origin, entry.parent):
                raise NodeError("INVALID_ARGUMENT", f"{wide.id} widened is another stream than {wide.id} at {self.state.id}")
            if step == "settle":
                if self.held.get(wide.id) == txn:
                    if wide.properties != entry.properties:  # (else undone: it stays as it was)
                        self._take(entry, wide)
                    del self.held[wide.id]
                return
            if entry.original or entry.properties not in (was.properties, wide.properties):
                raise NodeError("FAILED_PRECONDITION", f"{wide.id} at {self.state.id} is not the stream the plan widens")
            if entry.properties == wide.properties or self.held.get(wide.id) == txn:
                return  # (done already: a step asked again)
            residual = residual_of(entry, wide)
            if (step == "switch") != (entry.origin == self.state.id):
                raise NodeError("INVALID_ARGUMENT", f"{self.state.id} is {'not ' if step == 'switch' else ''}"
                                                    f"where {wide.id} is made")
            why = self._cannot_narrow(txn, wide.id)
            if why:
                raise NodeError("FAILED_PRECONDITION", f"{wide.id} cannot be widened at {self.state.id}: {why}")
            if step == "switch" and (self.executor.is_copy(wide.id) or not entry.operators):
                raise NodeError("FAILED_PRECONDITION", f"{wide.id} is a copy of its parent at {self.state.id}: "
                                                       "nothing computes it, nothing can be widened")
            self._narrow(wide.id, residual)
            if step == "switch":
                self.executor.rechain(wide.id, wide.operators)
                self._take(entry, wide)
            else:
                self.held[wide.id] = txn
                self.state.table.version += 1  # (a plan made over the narrow stream is stale here)

    def _cannot_narrow(self, txn: str, sid: str) -> str:
        if not hasattr(self.executor, "narrow"):
            return f"the {self.executor.name} executor cannot change a running operator"
        for t in self.state.transactions.open.values():
            if t.id != txn and (sid in t.pinned or any(s.parent == sid for s in t.streams)):
                return "another installation that reads it is in flight"
        for child in self.state.derived_here(sid):
            if self.executor.is_copy(child):
                return f"{child} is a copy of it"
            entry = self.state.table.get(child)
            if entry is not None and any(isinstance(op, alg.Sample) for op in entry.operators):
                return f"{child} samples it"
        for consumer, _ in self.state.deliveries.get(sid, ()):
            if getattr(consumer, "switch", None) is not None:
                return "a subscription reading it is moving"
        return ""

    def _narrow(self, sid: str, residual: tuple[alg.Operator, ...]) -> None:
        """Called with the lock held: the residual in front of every reader of ``sid`` here."""
        narrow = residual_chain(residual)
        self.executor.narrow(sid, residual)
        self.state.deliveries[sid] = [(NarrowedDelivery(c, narrow), v) for c, v in self.state.deliveries.get(sid, ())]

    def _take(self, entry: NetworkStream, wide: NetworkStream) -> None:
        """The entry becomes the wide stream's (its users and route as they are here)."""
        self.state.table.add(replace(entry, properties=wide.properties, operators=wide.operators,
                                     usage=wide.usage, estimate=wide.estimate))


def residual_of(entry: NetworkStream, wide: NetworkStream) -> tuple[alg.Operator, ...]:
    """What makes ``entry``'s items of ``wide``'s: selections and projections only, else refused."""
    match = match_properties(wide.properties, entry.properties)
    if not match.shareable or not all(isinstance(op, (alg.Select, alg.Project)) for op in match.residual):
        raise NodeError("INVALID_ARGUMENT", f"{wide.id} widened would not serve {wide.id}'s readers by a "
                                            "selection and a projection")
    return tuple(match.residual)


def widen(link: PeerLink, txn: str, widening: InPlace) -> None:
    """The coordinator's part: the three steps along the stream's route, in order, each at its
    peers at once. A refusal before the switch lets the held stream go where it was narrowed
    (its readers keep their residual, which changes nothing on narrow items) and raises; after
    it, a peer that does not settle keeps the stream held (and its readers exact)."""
    s = widening.was
    others = [p for p in dict.fromkeys(s.route) if p != s.origin]
    # (each peer narrows and settles only what reads the stream there: the peers of a step are
    # asked at once, one round trip per step rather than one per peer)
    answers = in_parallel([lambda peer=peer: link.widen_stream(peer, txn, "narrow", widening.wide, s)
                           for peer in others])
    refused = next((a for a in answers if isinstance(a, BaseException)), None)
    if refused is None:
        try:
            link.widen_stream(s.origin, txn, "switch", widening.wide, s)
        except NodeError as exc:
            refused = exc
    if refused is not None:
        narrowed = [p for p, a in zip(others, answers) if not isinstance(a, BaseException)]
        _settle(link, txn, narrowed, s, s, "%s stays held at %s: %s")  # (settled as it was)
        raise refused
    _settle(link, txn, others, widening.wide, s, "%s, widened, stays held at %s: %s")


def _settle(link: PeerLink, txn: str, peers: list[str], wide: NetworkStream, was: NetworkStream, warning: str) -> None:
    for peer, answer in zip(peers, in_parallel([lambda peer=peer: link.widen_stream(peer, txn, "settle", wide, was)
                                                for peer in peers])):
        if isinstance(answer, BaseException):
            log.warning(warning, was.id, peer, getattr(answer, "message", answer))


def widen_plan(link: PeerLink, plan, txn: str) -> bool:
    """The streams a plan widens in place (``Plan``'s parts' ``in_place``), widened before the
    plan is committed; False if a step was refused (nothing changed where it was: the plan is
    made again without widening)."""
    try:
        for part in plan.parts:
            if part.in_place is not None:
                widen(link, txn, part.in_place)
        return True
    except NodeError as exc:
        log.info("%s: %s; planned again without widening", plan.subscription, exc.message)
        return False
