"""Pure-Python implementations of the operator algebra, push-based (``push`` / ``flush``).

They process stream items (lxml elements) and window records exactly as the reference
evaluator would: the same value casts, comparisons, window assignment and left-to-right sums.
The simulator and the ``inline`` executor run plans with them; the Spark executor must agree
with them.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Union

from lxml import etree

from . import algebra as alg
from .stream_document import string_value
from .values import NAN, cast_double, compare, format_atomic
from .windows import WindowStats, make_windows

Number = Union[int, float]


# ============================================================================ records


@dataclass
class WindowRecord:
    """One window's partial aggregates: ``values[(fn, element)]``; ``sum``/``min``/``max`` are
    None when the window had no value of the element (then sum() is 0 and min/avg are empty)."""

    index: int
    values: dict[alg.Partial, Number | None] = field(default_factory=dict)

    def final(self, function: str, element: str) -> list[Number]:
        """The aggregate's value as XQuery gives it (a one-item or empty sequence)."""
        if function == "avg":
            total = self.values.get(("sum", element))
            count = self.values.get(("count", element))
            if not count:
                return []
            assert total is not None
            return [total / count]
        value = self.values.get((function, element))
        if function == "sum" and value is None:
            return [0]
        if function == "count":
            return [value or 0]
        return [] if value is None else [value]

    def to_xml(self) -> str:
        """``<w k="3"><p f="sum" e="en">12.5</p>…</w>``; doubles print in shortest round-trip form,
        so ``from_xml`` gives back exactly the same values."""
        parts = [f'<w k="{self.index}">']
        for (fn, el), value in self.values.items():
            head = f'<p f="{fn}" e="{_attr(el)}"'
            parts.append(head + "/>" if value is None else f"{head}>{format_atomic(value)}</p>")
        parts.append("</w>")
        return "".join(parts)

    @classmethod
    def from_xml(cls, text: str) -> "WindowRecord":
        el = etree.fromstring(text)
        record = cls(int(el.get("k")))
        for p in el:
            fn, element = p.get("f"), p.get("e")
            if p.text is None:
                record.values[(fn, element)] = None
            elif fn == "count":
                record.values[(fn, element)] = int(p.text)
            else:
                record.values[(fn, element)] = float(p.text)
        return record


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def serialize(value: "etree._Element | WindowRecord") -> str:
    """A stream value as it travels on the wire (UTF-8 XML element without declaration)."""
    if isinstance(value, WindowRecord):
        return value.to_xml()
    return etree.tostring(value, encoding="unicode", with_tail=False)


def item_size(value: etree._Element | WindowRecord) -> int:
    """Bytes an item occupies on the wire (UTF-8 XML, as DESIGN.md §7)."""
    if isinstance(value, WindowRecord):
        return len(value.to_xml().encode())
    return len(etree.tostring(value, encoding="utf-8", with_tail=False))


# ============================================================================ element access


def path_values(item: etree._Element, path: str) -> list[float]:
    """The doubles of the elements at an item-relative path (``.`` is the item itself)."""
    if path == alg.WHOLE_ITEM:
        return [cast_double(string_value(item))]
    current = [item]
    for name in path.split("/"):
        nxt: list = []
        for el in current:
            nxt.extend(el.iterchildren(name))
        current = nxt
    return [cast_double(string_value(el)) for el in current]


def compile_atom(atom: alg.Atom) -> Callable[[etree._Element], bool]:
    """An atom's test on one item: existential over repeated elements, NaN compares false."""
    op, left, right = atom.op, atom.left, atom.right
    c = float(atom.constant)
    if right is None:
        return lambda item: any(compare(op, x, c) for x in path_values(item, left))

    def test(item: etree._Element) -> bool:
        rights = [y + c for y in path_values(item, right)]
        return any(compare(op, x, y) for x in path_values(item, left) for y in rights)

    return test


# ============================================================================ operators


class OperatorInstance:
    """A running operator: ``push`` one input, get zero or more outputs; ``flush`` at the end."""

    definition: alg.Operator

    def push(self, value: object) -> list:
        raise NotImplementedError

    def flush(self) -> list:
        return []


class SelectInstance(OperatorInstance):
    def __init__(self, definition: alg.Select) -> None:
        self.definition = definition
        self.tests = [compile_atom(a) for a in definition.atoms]

    def push(self, value: etree._Element) -> list:
        for test in self.tests:
            if not test(value):
                return []
        return [value]


class ProjectInstance(OperatorInstance):
    """Keeps kept subtrees whole and the elements on the way to them, in document order."""

    def __init__(self, definition: alg.Project) -> None:
        self.definition = definition
        paths = definition.paths
        self.identity = alg.WHOLE_ITEM in paths
        self.whole = {tuple(p.split("/")) for p in paths}
        self.prefixes = {w[:i] for w in self.whole for i in range(1, len(w))}

    def push(self, value: etree._Element) -> list:
        if self.identity:
            return [value]
        return [self._prune(value, ())]

    def _prune(self, el: etree._Element, at: tuple[str, ...]) -> etree._Element:
        out = etree.Element(el.tag)
        for child in el:
            if not isinstance(child.tag, str):
                continue
            here = at + (child.tag,)
            if here in self.whole:
                c = copy.deepcopy(child)
                c.tail = None
                out.append(c)
            elif here in self.prefixes:
                out.append(self._prune(child, here))
        return out


class WindowAggregateInstance(OperatorInstance):
    def __init__(self, definition: alg.WindowAggregate, lateness: float = 0.0,
                 stats: WindowStats | None = None) -> None:
        self.definition = definition
        window = definition.window
        reference = None
        if window.kind == "diff":
            ref = window.ref
            assert ref is not None
            reference = lambda item: (path_values(item, ref) or [NAN])[0]  # noqa: E731
        self.stats = stats if stats is not None else WindowStats()
        self.windows = make_windows(window, reference, lateness, self.stats)

    def push(self, value: etree._Element) -> list:
        return [self._record(w.index, w.items) for w in self.windows.push(value)]

    def flush(self) -> list:
        return [self._record(w.index, w.items) for w in self.windows.flush()]

    def _record(self, index: int, items: list) -> WindowRecord:
        record = WindowRecord(index)
        for fn, element in self.definition.partials:
            if element == alg.WHOLE_ITEM and fn == "count":
                record.values[(fn, element)] = len(items)
                continue
            values = [v for item in items for v in path_values(item, element)]
            record.values[(fn, element)] = _aggregate(fn, values)
        return record


def _aggregate(fn: str, values: list[float]) -> Number | None:
    if fn == "count":
        return len(values)
    if not values:
        return None
    if fn == "sum":
        total = values[0]
        for v in values[1:]:
            total += v
        return total
    if any(math.isnan(v) for v in values):
        return NAN
    return min(values) if fn == "min" else max(values)


def _merge(fn: str, a: Number | None, b: Number | None) -> Number | None:
    if a is None:
        return b
    if b is None:
        return a
    if fn in ("sum", "count"):
        return a + b
    if math.isnan(a) or math.isnan(b):
        return NAN
    return min(a, b) if fn == "min" else max(a, b)


class CombineInstance(OperatorInstance):
    """Coarser windows from finer window records that arrive in index order.

    Coarse window k' is made of the source windows starting at k'·μ' + i·Δ (i < Δ'/Δ), whose
    source indices are (k'·μ' + i·Δ)/μ. It is final once a later source record arrives (or at
    the end); a count window additionally needs every constituent (only complete windows).
    """

    def __init__(self, definition: alg.CombineWindows) -> None:
        self.definition = definition
        s, w = definition.source, definition.window
        self.parts = int(w.size / s.size)
        self.stride = s.size / s.step  # source indices between consecutive constituents
        self.coarse_step = w.step / s.step  # source indices between coarse window starts
        self.count_kind = w.kind == "count"
        self.pending: dict[int, WindowRecord] = {}
        self.next_coarse: int | None = None

    def constituents(self, k: int) -> list[int]:
        first = k * self.coarse_step
        return [int(first + i * self.stride) for i in range(self.parts)]

    def _first_coarse_containing(self, m: int) -> int:
        # smallest k' whose constituents can include source index m
        span = (self.parts - 1) * self.stride
        return math.ceil((m - span) / self.coarse_step)

    def push(self, value: WindowRecord) -> list:
        self.pending[value.index] = value
        if self.next_coarse is None:
            self.next_coarse = self._first_coarse_containing(value.index)
        return self._emit(upto=value.index)

    def flush(self) -> list:
        if not self.pending:
            return []
        return self._emit(upto=None)

    def _emit(self, upto: int | None) -> list:
        out = []
        while self.next_coarse is not None:
            k = self.next_coarse
            members = self.constituents(k)
            if upto is not None and members[-1] >= upto:
                break  # constituents up to the newest record may still be incomplete
            present = [self.pending[m] for m in members if m in self.pending]
            if not present and upto is None and (not self.pending or max(self.pending) < members[0]):
                break
            if present and (not self.count_kind or len(present) == len(members)):
                out.append(self._combine(k, present))
            self.next_coarse = k + 1
            lowest_needed = self.constituents(k + 1)[0]
            for m in [m for m in self.pending if m < lowest_needed]:
                del self.pending[m]
        return out

    def _combine(self, k: int, records: list[WindowRecord]) -> WindowRecord:
        out = WindowRecord(k)
        for fn, element in self.definition.partials:
            value: Number | None = None
            for r in records:
                value = _merge(fn, value, r.values.get((fn, element)))
            out.values[(fn, element)] = value
        return out


class AggregateFilterInstance(OperatorInstance):
    def __init__(self, definition: alg.AggregateFilter) -> None:
        self.definition = definition
        self.tests = [self._compile(a) for a in definition.atoms]

    @staticmethod
    def _value(record: WindowRecord, name: str) -> list[float]:
        fn, _, rest = name.partition("(")
        return [float(v) for v in record.final(fn, rest[:-1])]

    def _compile(self, atom: alg.Atom) -> Callable[[WindowRecord], bool]:
        c = float(atom.constant)

        def test(record: WindowRecord) -> bool:
            lefts = self._value(record, atom.left)
            rights = [c] if atom.right is None else [y + c for y in self._value(record, atom.right)]
            return any(compare(atom.op, x, y) for x in lefts for y in rights)

        return test

    def push(self, value: WindowRecord) -> list:
        return [value] if all(t(value) for t in self.tests) else []


def instantiate(definition: alg.Operator, lateness: float = 0.0,
                stats: WindowStats | None = None) -> OperatorInstance:
    if isinstance(definition, alg.Select):
        return SelectInstance(definition)
    if isinstance(definition, alg.Project):
        return ProjectInstance(definition)
    if isinstance(definition, alg.WindowAggregate):
        return WindowAggregateInstance(definition, lateness, stats)
    if isinstance(definition, alg.CombineWindows):
        return CombineInstance(definition)
    if isinstance(definition, alg.AggregateFilter):
        return AggregateFilterInstance(definition)
    raise TypeError(f"unknown operator {definition!r}")


class Pipeline:
    """A chain of operator instances: what one installed stream computes from its parent."""

    def __init__(self, definitions: Iterable[alg.Operator], lateness: float = 0.0) -> None:
        self.stats = WindowStats()
        self.stages = [instantiate(d, lateness, self.stats) for d in definitions]

    def push(self, value: object) -> list:
        values = [value]
        for stage in self.stages:
            nxt: list = []
            for v in values:
                nxt.extend(stage.push(v))
            values = nxt
            if not values:
                break
        return values

    def flush(self) -> list:
        out: list = []
        for i, stage in enumerate(self.stages):
            values = stage.flush()
            for later in self.stages[i + 1:]:
                nxt: list = []
                for v in values:
                    nxt.extend(later.push(v))
                values = nxt
            out.extend(values)
        return out

    def run(self, values: Iterable[object]) -> list:
        out: list = []
        for v in values:
            out.extend(self.push(v))
        out.extend(self.flush())
        return out
