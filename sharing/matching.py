"""MATCHPROPERTIES, MATCHPREDICATES and MATCHAGGREGATIONS (paper §3.3, DESIGN.md §4).

``match_properties(stream, subscription)`` decides whether a stream already in the network
(described by its properties relative to its original input) can serve one input of a new
subscription, says why not when it cannot, and derives the *residual* operators: what must still
be applied to the stream to obtain exactly what the subscription needs from that input.

Sharing is sound for predicates, and complete where each element occurs once per item: a stream
filtered by P serves a subscription filtered by P' iff P' ⇒ P (over the reals; see
``predicate_graph``). An element that may occur more than once in an item (statistics have seen
it repeat, or have not seen it yet) is compared as XQuery compares it, each comparison on a value
of its own (``repetition``).
"""

from __future__ import annotations

import functools

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from wxquery.operators import definitions as alg

from .predicate_graph import PredicateGraph, graph_of
from .properties import InputProperties, InputStream, Projection, Properties, Selection
from .repetition import ONE_VALUE_EACH, UNKNOWN, Repetition, implied_atoms, owner

# (Repetition and UNKNOWN too, for callers that know the items)
__all__ = ["UNKNOWN", "Match", "Repetition", "covers", "full_pipeline", "match_aggregations", "match_predicates",
           "match_properties", "match_subscriptions", "raw_properties", "residual_selection"]

StreamKind = Literal["items", "records"]


@dataclass(frozen=True)
class Match:
    shareable: bool
    reason: str
    residual: tuple[alg.Operator, ...] = ()
    kind: StreamKind = "items"

    def to_json(self) -> dict:
        return {"shareable": self.shareable, "reason": self.reason,
                "residual": [str(op) for op in self.residual]}


def raw_properties(input_stream: InputStream) -> InputProperties:
    """The properties of an original stream as registered: all of it, unchanged."""
    return InputProperties(input=input_stream, variable="", selection=None,
                           projection=Projection(frozenset({alg.WHOLE_ITEM}),
                                                 frozenset({alg.WHOLE_ITEM})))


def covers(outputs: frozenset[str], path: str) -> bool:
    """Whether a stream carrying ``outputs`` (whole subtrees) carries the element ``path``."""
    if alg.WHOLE_ITEM in outputs or path in outputs:
        return True
    return any(path.startswith(o + "/") for o in outputs)


_TRUE = graph_of(())


def _graph(selection: Selection | None) -> PredicateGraph:
    return selection.graph if selection is not None else _TRUE


def _atoms(selection: Selection | None) -> tuple[alg.Atom, ...]:
    return selection.distinct_atoms if selection is not None else ()


def _reasoned(repetition: Repetition, *selections: Selection | None) -> Repetition:
    """``repetition``, unless a selection holds on no item with one value per element: it holds
    only where elements repeat (the query was accepted with a warning), and whatever statistics
    have seen so far, its elements are reasoned about as repeated."""
    if repetition.every_path_single or all(_graph(s).is_satisfiable() for s in selections):
        return repetition
    touched = frozenset(q for s in selections if s is not None for p in s.elements for q in (p, owner(p)))
    return Repetition(repetition.single - touched)  # (``pos/@ra``'s element too: it is what repeats)


def _mentioned(selection: Selection | None) -> frozenset[str]:
    return selection.elements | {alg.WHOLE_ITEM} if selection is not None else frozenset({alg.WHOLE_ITEM})


def _implied(given: Selection | None, wanted: tuple[alg.Atom, ...], repetition: Repetition) -> list[bool]:
    """Per atom of ``wanted``, whether ``given`` guarantees it on every item. Only an atom over
    paths ``given`` compares is: a comparison of an element an item lacks is false, so even
    ``$e/b <= $e/b + 1`` holds only where ``b`` is there."""
    mentioned = _mentioned(given)
    paths = {p for a in wanted for p in (a.left, a.right) if p is not None}
    if not repetition.multi_valued(paths | mentioned):  # (one value each: the graph is complete, and faster)
        ok = _graph(given).implied_atoms(wanted)
    else:
        ok = list(implied_atoms(_atoms(given), wanted, repetition))
    return [yes and all(p in mentioned for p in (a.left, a.right) if p is not None) for a, yes in zip(wanted, ok)]


def _implies(given: Selection | None, wanted: Selection, repetition: Repetition) -> bool:
    """Whether ``given`` guarantees every atom of ``wanted`` (``_implied``): with one value per
    element, the graphs' implication at once."""
    mentioned = _mentioned(given)
    if not wanted.elements <= mentioned:
        return False
    if not repetition.multi_valued(mentioned):
        return _graph(given).implies(wanted.graph)
    return all(implied_atoms(_atoms(given), _atoms(wanted), repetition))


def match_predicates(stream: Selection | None, subscription: Selection | None,
                     repetition: Repetition = UNKNOWN) -> tuple[bool, str]:
    """MATCHPREDICATES: the subscription's predicate must imply the stream's."""
    if stream is None:
        return True, "the stream is unfiltered"
    repetition = _reasoned(repetition, stream, subscription)
    if _implies(subscription, stream, repetition):
        return True, "the subscription's predicate implies the stream's"
    wanted = _atoms(stream)  # (which atoms not: said in the reason)
    ok = _implied(subscription, wanted, repetition)
    missing = " and ".join(str(a) for a, yes in zip(wanted, ok) if not yes)
    multi = repetition.multi_valued(p for a in wanted for p in (a.left, a.right))
    hint = (f" (comparisons of {', '.join(multi)} are taken one at a time: the element may occur "
            "more than once in an item)" if multi else "")
    return False, f"the stream's predicate is not implied by the subscription's: {missing}{hint}"


def residual_selection(stream: Selection | None, subscription: Selection | None,
                       repetition: Repetition = UNKNOWN) -> tuple[alg.Atom, ...]:
    """The subscription's atoms that the stream's predicate does not already guarantee.

    ``stream ∧ residual ⇔ subscription`` whenever the subscription implies the stream: every
    atom of the subscription is either guaranteed by the stream or kept.
    """
    if subscription is None:
        return ()
    # (as written, not the minimised graph's: that one splits ``a = 1`` into two bounds and
    # substitutes through equalities, which is the same only where each element has one value —
    # an item with two ``a``, 0 and 5, has one ≥ 1 and one ≤ 1 but none = 1)
    atoms = _atoms(subscription)
    ok = _implied(stream, atoms, _reasoned(repetition, stream, subscription))
    return tuple(a for a, yes in zip(atoms, ok) if not yes)


def _equivalent(a: Selection | None, b: Selection | None, repetition: Repetition) -> bool:
    if a is None or b is None:
        return a is b or _graph(a).equivalent(_graph(b))  # (None: no atoms to be there)
    repetition = _reasoned(repetition, a, b)
    return _implies(a, b, repetition) and _implies(b, a, repetition)


def _divides(a: Fraction, b: Fraction) -> bool:
    """b mod a = 0 for positive rationals."""
    return (b / a).denominator == 1


def _partials(p: InputProperties) -> tuple[alg.Partial, ...]:
    out: dict[alg.Partial, None] = {}
    for agg in p.aggregates:
        for partial in alg.partials_of(agg.function, agg.element):
            out[partial] = None
    return tuple(out)


def match_aggregations(stream: InputProperties, sub: InputProperties,
                       repetition: Repetition = UNKNOWN) -> tuple[bool, str]:
    """MATCHAGGREGATIONS with DESIGN.md's refinements (avg as sum/count, window divisibility,
    identical pre-window selection, filtered aggregates only for equal windows)."""
    w, w2 = stream.window, sub.window
    assert w is not None and w2 is not None
    if not _equivalent(stream.selection, sub.selection, repetition):
        return False, "the pre-window selections differ (aggregates need identical input)"
    if w.kind != w2.kind:
        return False, f"{w.kind} windows cannot serve {w2.kind} windows"
    if w.ref != w2.ref:
        return False, f"time windows over different reference elements ({w.ref} vs {w2.ref})"
    if w.key_set != w2.key_set and not (w2.key_set < w.key_set and w.kind == "diff"):
        if w2.key_set < w.key_set:
            over = "all items" if w2.key is None else f"per {w2.key}"
            return False, (f"count windows per {w.key} hold other items than count windows over {over} "
                           "(a time window per fewer keys is the union of its finer keys' windows; a count "
                           "window is not)")
        return False, (f"windows partitioned differently (by {w.key or 'nothing'} vs {w2.key}): "
                       "a window's items depend on its keys")
    if not _divides(w.size, w2.size):
        return False, f"the new window size {alg.format_fraction(w2.size)} is not a multiple " \
                      f"of the stream's {alg.format_fraction(w.size)} (Δ' mod Δ ≠ 0)"
    if not w.tiles:
        return False, f"the stream's window size {alg.format_fraction(w.size)} is not a " \
                      f"multiple of its step {alg.format_fraction(w.step)} (Δ mod μ ≠ 0)"
    if not _divides(w.step, w2.step):
        return False, f"the new step {alg.format_fraction(w2.step)} is not a multiple of the " \
                      f"stream's {alg.format_fraction(w.step)} (μ' mod μ ≠ 0)"
    have = set(_partials(stream))
    lacking = [alg.partial_name(p) for p in _partials(sub) if p not in have]
    if lacking:
        return False, "the stream lacks the aggregates " + ", ".join(lacking)
    if stream.aggregate_selection is not None:
        if (w.size, w.step, w.key_set) != (w2.size, w2.step, w2.key_set):
            return False, "a filtered aggregate stream serves only equal windows (of the same keys)"
        if not _graph(sub.aggregate_selection).implies(_graph(stream.aggregate_selection)):
            return False, "the stream's filter on aggregates is not implied by the subscription's"
    return True, "the aggregates can be computed from the stream's windows"


@functools.lru_cache(maxsize=1 << 16)
def match_properties(stream: InputProperties, sub: InputProperties,
                     repetition: Repetition = UNKNOWN) -> Match:
    """MATCHPROPERTIES: can ``stream`` serve ``sub``; and with which residual operators.
    Remembered (properties are values, a ``Match`` is frozen): a planner asks the same
    question for every subscription that needs what an earlier one needed."""
    if stream.input != sub.input:
        return Match(False, f"different input streams ({stream.input.stream} vs {sub.input.stream})")
    for op in stream.unknown:
        if op not in sub.unknown:
            return Match(False, f"unknown operator {op.name}{list(op.params)} is not in the subscription")
    if stream.sample != sub.sample and (stream.sample > 1 or stream.window is not None):
        return Match(False, f"the stream is {_sampled(stream.sample)}; the subscription needs {_sampled(sub.sample)}")
    if stream.window is not None:
        return _match_aggregate_stream(stream, sub, repetition)
    if stream.sample != sub.sample and alg.WHOLE_ITEM not in stream.projection.output:
        # (an item is sampled by a hash of its text: over a projection the same item would hash
        # otherwise, and the sample would not be the one every other plan of it takes)
        return Match(False, "a sample is taken over whole items, and the stream carries a projection of them")
    ok, reason = match_predicates(stream.selection, sub.selection, repetition)
    if not ok:
        return Match(False, reason)
    lacking = sorted(e for e in sub.projection.referenced if not covers(stream.projection.output, e))
    if lacking:
        return Match(False, "the stream does not carry " + ", ".join(lacking))
    residual: list[alg.Operator] = [alg.Sample(sub.sample)] if sub.sample != stream.sample else []
    atoms = residual_selection(stream.selection, sub.selection, repetition)
    if atoms:
        residual.append(alg.Select(atoms))
    if sub.window is not None:
        residual.append(alg.WindowAggregate(sub.window, _partials(sub)))
        if sub.aggregate_selection is not None:
            residual.append(alg.AggregateFilter(sub.aggregate_selection.atoms))
        return Match(True, reason, tuple(residual), "records")
    if sub.projection.output != stream.projection.output:
        residual.append(alg.Project(sub.projection.output))
    return Match(True, reason, tuple(residual), "items")


def _sampled(rate: int) -> str:
    return "every item" if rate == 1 else f"a 1/{rate} sample"


def _match_aggregate_stream(stream: InputProperties, sub: InputProperties, repetition: Repetition) -> Match:
    if sub.window is None:
        return Match(False, "the stream carries window aggregates; the subscription needs items")
    ok, reason = match_aggregations(stream, sub, repetition)
    if not ok:
        return Match(False, reason)
    residual: list[alg.Operator] = []
    assert stream.window is not None
    if (stream.window.size, stream.window.step, stream.window.key) != (sub.window.size, sub.window.step, sub.window.key):
        residual.append(alg.CombineWindows(stream.window, sub.window, _partials(sub)))  # (coarser, fewer keys, keys reordered)
    if sub.aggregate_selection is not None:
        atoms = residual_selection(stream.aggregate_selection, sub.aggregate_selection, ONE_VALUE_EACH)
        if atoms:
            residual.append(alg.AggregateFilter(atoms))
    return Match(True, reason, tuple(residual), "records")


def full_pipeline(sub: InputProperties) -> Match:
    """What the original stream needs to become what ``sub`` needs (query shipping's operators)."""
    return match_properties(raw_properties(sub.input), sub)


def match_subscriptions(old: Properties, new: Properties, repetition: Repetition = UNKNOWN) -> Match:
    """Can the stream(s) produced for the subscription ``old`` serve ``new``? Every input of
    ``new`` must be served by ``old``'s stream over the same original input. ``repetition``:
    what is known of the inputs' elements (nothing: any may occur more than once)."""
    reasons = []
    residual: list[alg.Operator] = []
    for inp in new.inputs:
        candidates = [o for o in old.inputs if o.input == inp.input]
        if not candidates:
            return Match(False, f'the old subscription does not read stream "{inp.input.stream}"')
        matches = [match_properties(o, inp, repetition) for o in candidates]
        ok = next((m for m in matches if m.shareable), None)
        if ok is None:
            return Match(False, matches[0].reason)
        reasons.append(ok.reason)
        residual.extend(ok.residual)
    return Match(True, "; ".join(dict.fromkeys(reasons)), tuple(residual))
