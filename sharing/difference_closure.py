"""The shortest-path closure of a system of difference constraints, decided sparsely.

``PredicateGraph`` turns a conjunction into edges ``x → y`` with integer weights (``x - y ≤ w``;
strictness is folded into the integer, see ``predicate_graph``). Everything it answers —
satisfiability, implied bounds, implication, the minimal equivalent system — comes from the one
``ShortestPathClosure`` built here, without ever materialising the dense all-pairs closure (a
4,000-atom chain has 16 million pairs):

1. **Potentials** ``h``: shortest distances from a virtual source with a 0-edge to every node,
   by Goldberg–Radzik (Bellman–Ford scanning in topological order of the admissible graph: one
   pass over a chain, whatever order its atoms were written in). There are none iff the graph
   has a negative cycle, i.e. the conjunction is unsatisfiable.
2. **Reduced weights** ``w'(x, y) = w(x, y) + h(x) - h(y) ≥ 0`` (Johnson). A cycle of total
   weight 0 has only 0-reduced edges, so the strongly connected components of the 0-reduced edges
   are the classes of nodes fixed relative to each other: ``x - y = h(y) - h(x)`` exactly.
3. The **quotient** ``Q`` over those classes has no zero cycle, and for every two nodes
   ``d(x, y) = h(y) - h(x) + D(C(x), C(y))`` where ``D`` is the Dijkstra distance in ``Q`` under
   reduced weights. Rows and columns of ``D`` are computed on demand and cached; other bounds
   are decided in groups (same source, or same target) by one Dijkstra each, which stops once
   its targets are settled or its largest bound is out of reach.
4. The **minimal equivalent system** is read off the same closure in ``minimal_system``.

Every loop calls ``check`` so that a caller with a deadline can stop the work (see
``wxquery.limits``); nothing is cached from an interrupted computation.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Container, Hashable, Iterable, Iterator

import networkx as nx

from wxquery.limits import Check, never_interrupted

Node = Hashable
Adjacency = dict[Node, dict[Node, int]]


def potentials(succ: Adjacency, check: Check = never_interrupted) -> dict[Node, int] | None:
    """Shortest distances from a virtual source joined to every node by a 0-edge, by
    Goldberg–Radzik; ``None`` when the graph has a negative cycle.

    A pass scans the nodes relabelled by the previous one in topological order of the graph of
    their negative-reduced-cost edges, so one pass settles any chain; a back edge closing a cycle
    of such edges is a negative cycle. As in Bellman–Ford, pass ``i`` settles every node whose
    shortest path has ``i`` edges, so a pass beyond ``|V|`` also proves a negative cycle.
    """
    d = dict.fromkeys(succ, 0)
    relabeled: dict[Node, None] = dict.fromkeys(succ)
    passes = 0
    while relabeled:
        passes += 1
        if passes > len(succ) + 1:
            return None
        order = _topological_scan(succ, d, relabeled, check)
        if order is None:
            return None
        relabeled = {}
        for u in order:
            check()
            du = d[u]
            for v, w in succ[u].items():
                if du + w < d[v]:
                    d[v] = du + w
                    relabeled[v] = None
    return d


def _topological_scan(succ: Adjacency, d: dict[Node, int], relabeled: Iterable[Node],
                      check: Check) -> list[Node] | None:
    """Depth-first over edges of negative reduced cost from the relabelled nodes (relaxing
    them on the way): the nodes reached, in topological order; ``None`` on a negative cycle."""
    neg_count: dict[Node, int] = {}  # negative edges on the DFS path; doubles as 'visited'
    order: list[Node] = []
    for root in relabeled:
        if root in neg_count:
            continue
        d_root = d[root]
        if all(d_root + w >= d[v] for v, w in succ[root].items()):
            continue
        neg_count[root] = 0
        stack = [(root, iter(succ[root].items()))]
        on_stack = {root}
        while stack:
            check()
            u, edges = stack[-1]
            step = next(edges, None)
            if step is None:
                order.append(u)
                stack.pop()
                on_stack.discard(u)
                continue
            v, w = step
            t = d[u] + w
            if t < d[v]:
                d[v] = t
                if v not in neg_count:
                    neg_count[v] = neg_count[u] + 1
                    stack.append((v, iter(succ[v].items())))
                    on_stack.add(v)
                elif v in on_stack and neg_count[u] + 1 > neg_count[v]:
                    return None  # a back edge closing a cycle with a negative edge
    order.reverse()
    return order


def search(adj: Adjacency, source: Node, check: Check, *, limit: int | None = None,
           until: Iterable[Node] = (), avoid: Container[Node] = frozenset(),
           indirect: set[Node] | None = None) -> tuple[dict[Node, int], set[Node]]:
    """Dijkstra from ``source`` over non-negative weights: distances, and the set of settled
    nodes (whose distance is final).

    Stops once the next distance exceeds ``limit``, or once every node of ``until`` (if any) is
    settled; never enters a node of ``avoid``. With ``indirect``, collects the nodes reached at
    their final distance by a path of two or more edges — exact for every node settled before
    a stop by ``limit`` (or a full search), because all their shortest-path predecessors were
    settled and relaxed before the stop.
    """
    dist: dict[Node, int] = {source: 0}
    settled: set[Node] = set()
    wanted = set(until)
    heap: list[tuple[int, int, Node]] = [(0, 0, source)]
    tie = 0  # nodes need not be orderable
    while heap:
        du, _, u = heapq.heappop(heap)
        if u in settled:
            continue
        if limit is not None and du > limit:
            break
        check()
        settled.add(u)
        if wanted:
            wanted.discard(u)
            if not wanted:
                break
        for v, w in adj[u].items():
            if v in avoid:
                continue
            dv = du + w
            if v not in dist or dv < dist[v]:
                dist[v] = dv
                tie += 1
                heapq.heappush(heap, (dv, tie, v))
                if indirect is not None:
                    if u == source:
                        indirect.discard(v)
                    else:
                        indirect.add(v)
            elif indirect is not None and dv == dist[v] and u != source:
                indirect.add(v)
    return dist, settled


class ShortestPathClosure:
    """Satisfiability, bounds and the minimal system of one graph of integer-weighted edges.

    ``succ[x][y] = w`` stands for ``x - y ≤ w``. ``canonical`` orders nodes when a class needs a
    representative (the least one represents it), so results do not depend on input order.
    """

    def __init__(self, succ: Adjacency, check: Check = never_interrupted,
                 canonical: Callable[[Node], object] = lambda n: n) -> None:
        self.succ = succ
        self.h = potentials(succ, check)
        self.classes: dict[Node, list[Node]] = {}  # representative -> members, canonical order
        self.cls: dict[Node, Node] = {}  # node -> representative of its class
        self.qsucc: Adjacency = {}
        self.qpred: Adjacency = {}
        self._rows: dict[Node, dict[Node, int]] = {}
        self._columns: dict[Node, dict[Node, int]] = {}
        if self.h is not None:
            self._quotient(check, canonical)

    @property
    def satisfiable(self) -> bool:
        return self.h is not None

    def _quotient(self, check: Check, canonical: Callable[[Node], object]) -> None:
        h = self.h
        assert h is not None
        tight = nx.DiGraph()
        for u, row in self.succ.items():
            check()
            for v, w in row.items():
                if u != v and w + h[u] - h[v] == 0:
                    tight.add_edge(u, v)
        for component in nx.strongly_connected_components(tight):
            check()
            if len(component) > 1:
                members = sorted(component, key=canonical)
                self.classes[members[0]] = members
                for m in members:
                    self.cls[m] = members[0]
        for u in self.succ:
            if u not in self.cls:
                self.cls[u] = u
                self.classes[u] = [u]
            self.qsucc.setdefault(self.cls[u], {})
            self.qpred.setdefault(self.cls[u], {})
        for u, row in self.succ.items():
            check()
            cu = self.cls[u]
            for v, w in row.items():
                cv = self.cls[v]
                if cu == cv:
                    continue
                reduced = w + h[u] - h[v]
                if reduced < self.qsucc[cu].get(cv, reduced + 1):
                    self.qsucc[cu][cv] = reduced
                    self.qpred[cv][cu] = reduced

    # ------------------------------------------------------------------ distances

    def row(self, x: Node, check: Check = never_interrupted) -> dict[Node, int]:
        """Reduced distances in ``Q`` from the class of ``x`` to every class it reaches."""
        c = self.cls[x]
        if c not in self._rows:
            self._rows[c] = search(self.qsucc, c, check)[0]
        return self._rows[c]

    def column(self, y: Node, check: Check = never_interrupted) -> dict[Node, int]:
        """Reduced distances in ``Q`` to the class of ``y`` from every class that reaches it."""
        c = self.cls[y]
        if c not in self._columns:
            self._columns[c] = search(self.qpred, c, check)[0]
        return self._columns[c]

    def keep(self, c: Node, row: dict[Node, int] | None = None,
             column: dict[Node, int] | None = None) -> None:
        """Cache a full row or column of class ``c`` computed elsewhere (``minimal_system``)."""
        if row is not None:
            self._rows.setdefault(c, row)
        if column is not None:
            self._columns.setdefault(c, column)

    def distance(self, x: Node, y: Node, check: Check = never_interrupted,
                 by: str = "row") -> int | None:
        """The tightest implied bound on ``x - y`` (an encoded weight), ``None`` if unbounded.
        ``by`` says whether to compute (and cache) the row of ``x`` or the column of ``y`` when
        neither is cached yet."""
        h = self.h
        assert h is not None
        cx, cy = self.cls[x], self.cls[y]
        if cx == cy:
            return h[y] - h[x]
        if cx in self._rows or (cy not in self._columns and by == "row"):
            reduced = self.row(x, check).get(cy)
        else:
            reduced = self.column(y, check).get(cx)
        return None if reduced is None else reduced + h[y] - h[x]

    def within(self, pairs: list[tuple[Node, Node, int]],
               check: Check = never_interrupted) -> Iterator[bool]:
        """For each ``(x, y, limit)``, lazily: whether ``d(x, y) ≤ limit``.

        From a cached row or column when there is one; the other pairs are grouped by source
        (or by target, whichever makes fewer groups) and each group is decided by one Dijkstra
        that stops once its targets are settled or its largest limit is out of reach. Being
        lazy, a caller that needs all of them to hold stops at the first that does not.
        """
        h = self.h
        assert h is not None
        groups: dict[tuple[bool, Node], list[int]] = {}
        answers: list[bool | None] = []
        for i, (x, y, limit) in enumerate(pairs):
            cx, cy = self.cls[x], self.cls[y]
            answer: bool | None = None
            if cx == cy:
                answer = h[y] - h[x] <= limit
            elif cx in self._rows or cy in self._columns:
                d = self.distance(x, y, check)
                answer = d is not None and d <= limit
            answers.append(answer)
        sources = {self.cls[x] for (x, _, _), a in zip(pairs, answers) if a is None}
        targets = {self.cls[y] for (_, y, _), a in zip(pairs, answers) if a is None}
        forward = len(sources) <= len(targets)
        for i, (x, y, _) in enumerate(pairs):
            if answers[i] is None:
                groups.setdefault((forward, self.cls[x] if forward else self.cls[y]), []).append(i)
        done: set[tuple[bool, Node]] = set()
        for i, (x, y, limit) in enumerate(pairs):
            if answers[i] is None:
                key = (forward, self.cls[x] if forward else self.cls[y])
                if key not in done:
                    done.add(key)
                    self._decide_group(key[1], forward, pairs, groups[key], answers, check)
            yield bool(answers[i])

    def _decide_group(self, c: Node, forward: bool, pairs: list[tuple[Node, Node, int]],
                      members: list[int], answers: list[bool | None], check: Check) -> None:
        """One bounded Dijkstra from class ``c`` (forward, or backward over in-edges) decides
        every pair of the group: ``reduced distance ≤ limit - h(y) + h(x)``."""
        h = self.h
        assert h is not None
        reduced = {i: pairs[i][2] - h[pairs[i][1]] + h[pairs[i][0]] for i in members}
        others = {i: self.cls[pairs[i][1]] if forward else self.cls[pairs[i][0]] for i in members}
        live = [i for i in members if reduced[i] >= 0]
        for i in members:
            answers[i] = False
        if not live:
            return
        dist, settled = search(self.qsucc if forward else self.qpred, c, check,
                               limit=max(reduced[i] for i in live),
                               until={others[i] for i in live})
        for i in live:
            o = others[i]
            answers[i] = o in settled and dist[o] <= reduced[i]
