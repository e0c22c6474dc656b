"""The minimal equivalent system of a satisfiable conjunction, read off its closure.

Larsen, Larsson, Pettersson and Yi ("Efficient verification of real-time systems: compact data
structure and state-space reduction", RTSS 1997) show that a system of difference constraints
has a minimal equivalent system made of one cycle through each class of nodes fixed relative to
each other (the zero-cycle classes of ``ShortestPathClosure``), and the edges of the quotient
``Q`` between classes that no other path of ``Q`` implies. ``Q`` has no zero cycle, so that set
is unique, and the result depends only on the closure: equivalent conjunctions minimise to the
same system (classes are represented by their least member in canonical order).

An edge ``c → t`` of ``Q`` is implied by the others iff some other path ``c → … → t`` is as short
— equivalently, iff ``D(c, x) + w(x, t) ≤ w(c, t)`` for some other in-neighbour ``x`` of ``t``
(such a path never uses the edge itself: that would close a cycle of positive weight). It is
decided without a search when ``c`` has one out-edge or ``t`` one in-edge (chains, stars); for
the rest, as queries have them:

* **hubs** — nodes of high degree, typically the zero node that every range bound meets — are
  handled first: one full row and one full column of the closure per hub decide every edge
  that a path through the hub implies, and the edges at the hub itself;
* every other edge is decided by one Dijkstra per source that never enters a hub, stops as soon
  as the other in-neighbours of its targets are settled, and never goes further than the
  largest slack ``w(c, t) - w(x, t)`` can use.

Minimising a general graph is as hard as a transitive reduction (no near-linear algorithm is
known), so a crafted query can still make this cost more than linear time; ``check`` lets a
deadline stop it, and ``wxquery.limits`` bounds the size of what it is given.
"""

from __future__ import annotations

import math

from wxquery.limits import Check

from .difference_closure import Node, ShortestPathClosure, search

HUB_MIN_DEGREE = 32
HUB_SQRT_FACTOR = 2  # and at least this many times the square root of the undecided edges


def minimal_edges(closure: ShortestPathClosure, check: Check) -> list[tuple[Node, Node, int]]:
    """The edges ``(x, y, w)`` (``x - y ≤ w``, encoded weight) of the minimal system."""
    h = closure.h
    assert h is not None, "an unsatisfiable system has no minimal form"
    edges: list[tuple[Node, Node, int]] = []
    for members in closure.classes.values():
        if len(members) > 1:
            for a, b in zip(members, members[1:] + members[:1]):
                edges.append((a, b, h[b] - h[a]))
    qsucc, qpred = closure.qsucc, closure.qpred
    undecided = {(c, t) for c, outs in qsucc.items() if len(outs) > 1
                 for t in outs if len(qpred[t]) > 1}
    implied: set[tuple[Node, Node]] = set()
    hubs = _hubs(closure, len(undecided))
    for z in hubs:
        _decide_through_hub(closure, z, undecided, implied, check)
    _decide_avoiding_hubs(closure, undecided, set(hubs), implied, check)
    for c, outs in qsucc.items():
        for t, reduced in outs.items():
            if (c, t) not in implied:
                edges.append((c, t, reduced + h[t] - h[c]))
    return edges


def _hubs(closure: ShortestPathClosure, undecided: int) -> list[Node]:
    """Nodes whose degree makes two full searches cheaper than crossing them in every search."""
    if not undecided:
        return []
    threshold = max(HUB_MIN_DEGREE, HUB_SQRT_FACTOR * math.isqrt(undecided))
    degree = {c: len(outs) + len(closure.qpred[c]) for c, outs in closure.qsucc.items()}
    return sorted((c for c, d in degree.items() if d >= threshold), key=lambda c: -degree[c])


def _decide_through_hub(closure: ShortestPathClosure, z: Node,
                        undecided: set[tuple[Node, Node]], implied: set[tuple[Node, Node]],
                        check: Check) -> None:
    """Decide the edges at ``z`` and those implied by a path through ``z``: one row and one
    column of the closure (kept for later questions), with 'reached by ≥ 2 edges' flags."""
    qsucc = closure.qsucc
    out_indirect: set[Node] = set()
    in_indirect: set[Node] = set()
    row = search(qsucc, z, check, indirect=out_indirect)[0]
    column = search(closure.qpred, z, check, indirect=in_indirect)[0]
    closure.keep(z, row=row, column=column)
    for c, t in list(undecided):
        check()
        w = qsucc[c][t]
        if c == z:
            through = row[t] < w or t in out_indirect
        elif t == z:
            through = column[c] < w or c in in_indirect
        elif c in column and t in row and column[c] + row[t] <= w:
            through = True
        else:
            continue  # no path through z implies it; decided later (unless z is an endpoint)
        undecided.discard((c, t))
        if through:
            implied.add((c, t))


def _decide_avoiding_hubs(closure: ShortestPathClosure, undecided: set[tuple[Node, Node]],
                          hubs: set[Node], implied: set[tuple[Node, Node]], check: Check) -> None:
    """Decide the remaining edges (no endpoint is a hub) by paths that avoid every hub."""
    qsucc, qpred = closure.qsucc, closure.qpred
    by_source: dict[Node, list[Node]] = {}
    for c, t in undecided:
        by_source.setdefault(c, []).append(t)
    for c, targets in by_source.items():
        check()
        if sum(1 for y in qsucc[c] if y not in hubs) < 2:
            continue  # every other first step enters a hub: those paths were decided
        candidates: dict[Node, list[Node]] = {}
        limit = -1
        for t in targets:
            w = qsucc[c][t]
            cand = [x for x, wx in qpred[t].items() if x != c and x not in hubs and wx <= w]
            if cand:
                candidates[t] = cand
                limit = max(limit, w - min(qpred[t][x] for x in cand))
        if not candidates:
            continue
        wanted = {x for cand in candidates.values() for x in cand}
        dist, settled = search(qsucc, c, check, limit=limit, until=wanted, avoid=hubs)
        for t, cand in candidates.items():
            w = qsucc[c][t]
            if any(x in settled and dist[x] + qpred[t][x] <= w for x in cand):
                implied.add((c, t))
