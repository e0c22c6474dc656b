"""The property values of subscriptions and streams (paper §3.1, DESIGN.md §4).

Properties say *what part of which input stream* a subscription needs and its result stream
contains: per input stream, the selection (a predicate graph over element paths relative to the
stream item), the projection (output and referenced elements), the window, the window
aggregates, a filter on the aggregate values, and unknown operators by parameters; plus what only
the subscriber's super-peer does (post-processing). Matching, planning, statistics and
serialization all work on these values, never on the query's AST, so they are plain immutable
data here, apart from ``property_extraction`` which derives them from a checked query.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from wxquery.join_band import Band, key_text
from wxquery.operators.definitions import Atom, WindowSpec

from .predicate_graph import PredicateGraph, graph_of


@dataclass(frozen=True)
class InputStream:
    """An original input: a registered stream and the path from its document node to its items."""

    stream: str
    items: tuple[str, ...]

    def to_json(self) -> dict:
        return {"stream": self.stream, "items": "/".join(self.items)}


@dataclass(frozen=True)
class Selection:
    """A conjunction of atomic predicates over item-relative element paths (or aggregate names)."""

    atoms: tuple[Atom, ...]

    @cached_property
    def graph(self) -> PredicateGraph:
        return graph_of(self.atoms)

    @cached_property
    def elements(self) -> frozenset[str]:
        return frozenset(n for a in self.atoms for n in (a.left, a.right) if n is not None)

    @cached_property
    def distinct_atoms(self) -> tuple[Atom, ...]:
        """The atoms, each once, in order (a query may write one twice)."""
        return tuple(dict.fromkeys(self.atoms))

    def to_json(self) -> dict:
        minimized = self.graph.minimized()
        return {
            "predicate": [str(a) for a in self.atoms],
            "graph": minimized.to_json(),
        }


@dataclass(frozen=True)
class Projection:
    """``output``: elements the result stream carries; ``referenced``: every element the
    subscription touches (output ∪ predicates ∪ window reference ∪ aggregated elements)."""

    output: frozenset[str]
    referenced: frozenset[str]

    def to_json(self) -> dict:
        return {"output": sorted(self.output), "referenced": sorted(self.referenced)}




@dataclass(frozen=True)
class Aggregation:
    """A window aggregate. ``avg`` travels as (sum, count) so that it can be reused."""

    function: str
    element: str  # item-relative path, '.' for count of items

    @property
    def name(self) -> str:
        return f"{self.function}({self.element})"

    @property
    def internal(self) -> tuple[str, ...]:
        return ("sum", "count") if self.function == "avg" else (self.function,)

    def to_json(self) -> dict:
        return {"function": self.function, "element": self.element, "internal": list(self.internal)}


@dataclass(frozen=True)
class UnknownOperator:
    """An operator whose semantics the optimizer does not know: shareable only with equal
    parameters (paper, Algorithm 2, lines 25–30)."""

    name: str
    params: tuple[str, ...]

    def to_json(self) -> dict:
        return {"name": self.name, "params": list(self.params)}


JOIN_OPERATOR = "band-join"  # the unknown operator a joined stream's properties name its join by


def joined_by(props: "InputProperties") -> UnknownOperator | None:
    """The join a joined stream's properties describe (``sharing.join_planning``), if any."""
    return next((u for u in props.unknown if u.name == JOIN_OPERATOR), None)


@dataclass(frozen=True)
class InputProperties:
    """Everything a subscription does to one input stream, in operator order."""

    input: InputStream
    variable: str
    selection: Selection | None
    projection: Projection
    window: WindowSpec | None = None
    aggregates: tuple[Aggregation, ...] = ()
    aggregate_selection: Selection | None = None
    unknown: tuple[UnknownOperator, ...] = ()
    # a 1/sample Bernoulli sample of the items, taken first (``--approximate`` under overload; 1: all)
    sample: int = 1

    def __hash__(self) -> int:
        """Computed once: planning looks properties up by value again and again, and hashing
        their fractions anew each time cost a fifth of a registration at scale."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.input, self.variable, self.selection, self.projection, self.window,
                      self.aggregates, self.aggregate_selection, self.unknown, self.sample))
            self.__dict__["_hash"] = h
        return h

    def __getstate__(self) -> dict:
        """(Not the hash: strings hash differently in another process.)"""
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @property
    def per_item(self) -> bool:
        """Per-item operators only (selection, projection): each output depends on its own
        input item alone — what a hull can be taken of, and what a re-plan can resume."""
        return (self.window is None and not self.aggregates and self.aggregate_selection is None
                and not self.unknown and self.sample == 1)

    def operators(self) -> list[dict]:
        ops: list[dict] = [{"op": "sample", "rate": self.sample}] if self.sample > 1 else []
        if self.selection is not None:
            ops.append({"op": "selection", **self.selection.to_json()})
        ops.append({"op": "projection", **self.projection.to_json()})
        if self.window is not None:
            ops.append({"op": "window", **self.window.to_json()})
        for agg in self.aggregates:
            ops.append({"op": "aggregate", **agg.to_json()})
        if self.aggregate_selection is not None:
            ops.append({"op": "aggregate-selection", **self.aggregate_selection.to_json()})
        for u in self.unknown:
            ops.append({"op": "unknown", **u.to_json()})
        return ops

    def to_json(self) -> dict:
        return {**self.input.to_json(), "variable": "$" + self.variable,
                "operators": self.operators()}


@dataclass(frozen=True)
class PostProcessing:
    """What only the subscriber's super-peer does: restructuring, joins, residual conditions,
    windows whose contents (not just aggregates) are returned."""

    result_root: str | None
    join_predicates: tuple[str, ...] = ()
    residual_conditions: tuple[str, ...] = ()
    local_windows: tuple[str, ...] = ()
    # joins that stream within a band (``wxquery.join_band``): the others wait for their inner
    # stream to end
    window_joins: tuple[str, ...] = ()
    # the band of a join that may be placed in the network (``wxquery.join_band.network_band``)
    network_join: Band | None = None
    # … and the equalities between its inputs its joining peer applies (``network_keys``)
    network_join_keys: tuple[Atom, ...] = ()

    def to_json(self) -> dict:
        return {"result_root": self.result_root, "restructuring": True,
                "join_predicates": list(self.join_predicates),
                "window_joins": [f"{b} (both inputs in order of these elements)" for b in self.window_joins],
                # (the planner decides where: at the subscriber's super-peer, or where its inputs meet)
                "join_in_network": (str(self.network_join) + "".join(
                    f", key {key_text(self.network_join, k)}" for k in self.network_join_keys)
                    if self.network_join is not None else None),
                "residual_conditions": list(self.residual_conditions),
                "local_windows": list(self.local_windows)}


@dataclass(frozen=True)
class Properties:
    """Properties of a subscription. ``applied_upstream`` (ids of AST comparisons) and
    ``aggregated_upstream`` (ids of for clauses) say what the network applies before the
    subscriber's super-peer, so that post-processing does not apply it twice."""

    inputs: tuple[InputProperties, ...]
    post_processing: PostProcessing
    applied_upstream: frozenset[int] = field(default=frozenset(), compare=False, repr=False)
    aggregated_upstream: frozenset[int] = field(default=frozenset(), compare=False, repr=False)

    def to_json(self) -> dict:
        return {"inputs": [i.to_json() for i in self.inputs],
                "post_processing": self.post_processing.to_json()}
