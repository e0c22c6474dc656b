"""Operator chains evaluated over a whole micro-batch of items at once (the Spark executor's tasks).

The inline operators push one item at a time; a Spark task instead receives thousands of items of
one input stream, so this module parses them in one go, extracts each referenced element as a
column (numpy when every item has exactly one such element, lists otherwise), evaluates every
chain's selection as vectorised comparisons, and reduces window chains to **per-pane partial
aggregates** (min, max, sum, count) that the driver merges across micro-batches
(``window_panes``). Everything follows ``wxquery.inline_operators`` to the value: the same casts,
NaN rules, existential comparisons over repeated elements, and the same late/missing-reference
accounting as ``wxquery.windows``.

A pane is the largest interval that never straddles a window boundary: ``g = gcd(Δ, μ)``, pane p
holds references in ``[p·g, (p+1)·g)`` (time windows) or ordinals ``p·g … p·g+g-1`` (count
windows); window k is the panes ``k·μ/g … (k·μ+Δ)/g - 1``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Iterable, Sequence, Union

import numpy as np
from lxml import etree

from wxquery import algebra as alg
from wxquery.inline_operators import ProjectInstance, _aggregate, path_values
from wxquery.stream_document import string_value
from wxquery.values import cast_double, compare

Column = Union[np.ndarray, list]  # one float per item, or a list of floats per item

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
# Every text a plain decimal or double literal (what float() and xs:double agree on).
# A child path of plain names: evaluated as XPath, by ``iterchildren`` and by ``iter`` alike.
_SIMPLE_PATH = re.compile(r"[A-Za-z_][\w.-]*(?:/[A-Za-z_][\w.-]*)*\Z")
_XPATH_OPERATOR_NAMES = {"and", "or", "div", "mod"}


def _simple(path: str) -> bool:
    return bool(_SIMPLE_PATH.match(path)) and not _XPATH_OPERATOR_NAMES & set(path.split("/"))


# Over these characters Python's float() accepts exactly the xs:double literals (no "inf", "nan",
# underscores or Unicode digits, which float() would take and xs:double would not).
_NUMBER_CHARS = re.compile(r"[0-9.eE+\- \t\r\n]*\Z")


# ============================================================================ chain definitions


@dataclass(frozen=True)
class Chain:
    """One installed derived stream, normalised for batch evaluation.

    ``atoms`` (selection) and ``project`` apply to items; then at most one window operator
    (``WindowAggregate`` on items, ``CombineWindows`` on records); ``filters`` are aggregate
    filters on finished window records. ``start`` is the first feed offset the chain sees.
    """

    id: int
    stream: str
    parent: str
    input_kind: str  # "items" | "records"
    atoms: tuple[alg.Atom, ...]
    project: frozenset[str] | None
    window: alg.WindowAggregate | alg.CombineWindows | None
    filters: tuple[alg.Atom, ...]
    start: int

    @property
    def output_kind(self) -> str:
        return "records" if self.window is not None or self.input_kind == "records" else "items"

    def paths(self) -> set[str]:
        """Element paths the task must extract for this chain."""
        out: set[str] = set()
        for a in self.atoms:
            out.add(a.left)
            if a.right is not None:
                out.add(a.right)
        if isinstance(self.window, alg.WindowAggregate):
            if self.window.window.ref is not None:
                out.add(self.window.window.ref)
            out.update(e for fn, e in self.window.partials if not (fn == "count" and e == alg.WHOLE_ITEM))
        return out


def normalise(cid: int, stream: str, parent: str, input_kind: str,
              operators: Iterable[alg.Operator], start: int) -> Chain:
    """Fold an operator chain into a ``Chain``; refuses shapes the planner never produces."""
    atoms: list[alg.Atom] = []
    filters: list[alg.Atom] = []
    project = None
    window = None
    for op in operators:
        if isinstance(op, alg.Select) and window is None and project is None and input_kind == "items":
            atoms.extend(op.atoms)
        elif isinstance(op, alg.Project) and window is None and input_kind == "items":
            project = op.paths if project is None else project & op.paths
        elif isinstance(op, alg.WindowAggregate) and window is None and input_kind == "items":
            window = op
        elif isinstance(op, alg.CombineWindows) and window is None and input_kind == "records":
            window = op
        elif isinstance(op, alg.AggregateFilter) and (window is not None or input_kind == "records"):
            filters.extend(op.atoms)
        else:
            raise ValueError(f"the Spark executor cannot run {op} at this position of {list(map(str, operators))}")
    if project is not None and alg.WHOLE_ITEM in project:
        project = None
    return Chain(cid, stream, parent, input_kind, tuple(atoms), project, window, tuple(filters), start)


def pane_width(window: alg.WindowSpec) -> Fraction:
    a, b = Fraction(window.size), Fraction(window.step)
    return Fraction(math.gcd(a.numerator * b.denominator, b.numerator * a.denominator),
                    a.denominator * b.denominator)


@dataclass
class Cursor:
    """What a window chain carries from one micro-batch to the next (kept by the driver)."""

    seen: int = 0  # count windows: items that reached the window
    high: float = -math.inf  # time windows: highest reference accepted
    late: int = 0
    missing: int = 0


# ============================================================================ columns


class ItemBatch:
    """The parsed items of one batch of one input stream, with cached element columns.

    ``texts`` is any sequence of the items' wire texts (read only for items a chain passes on);
    ``joined`` may give them already concatenated as UTF-8 (as the Spark feed hands them to a
    task), which spares building one Python string per item just to join them again.
    """

    def __init__(self, texts: Sequence[str], joined: bytes | None = None) -> None:
        self.texts = texts
        if joined is None:
            joined = "".join(texts).encode("utf-8")
        self.namespaced = b"xmlns" in joined or b"{" in joined  # "{": Clark notation in a tag
        try:
            root = etree.fromstring(b"<b>" + joined + b"</b>", parser=_PARSER)
            items = list(root.iterchildren(etree.Element))  # not comments or PIs between items
            if len(items) != len(texts):
                raise ValueError("item count differs")
            self.root: etree._Element | None = root
        except (etree.XMLSyntaxError, ValueError):
            # the node validated every item; a mixed batch still must not fail as a whole
            self.root = None
            items = []
            for t in texts:
                try:
                    items.append(etree.fromstring(t.encode("utf-8"), parser=_PARSER))
                except etree.XMLSyntaxError:
                    items.append(etree.Element("invalid"))
        self.items = items
        self.n = len(items)
        self._columns: dict[str, Column] = {}
        self._checked: set[str] = set()
        self._single: set[str] = set()  # simple paths every item has

    def prepare(self, paths: Iterable[str]) -> None:
        """Find, in one pass over the batch, which simple paths every item has.

        A path every item has, whose last name occurs exactly n times in the batch, occurs
        exactly once per item, in item order: its column is then read off ``iter(name)``
        without evaluating the path per item.
        """
        todo = sorted(p for p in set(paths) - self._checked if _simple(p))
        self._checked.update(todo)
        if self.root is None or not self.n or not todo:
            return
        if self.root.xpath(f"count(*[{' and '.join(todo)}])") == self.n:
            self._single.update(todo)
        elif len(todo) > 1:
            self._single.update(p for p in todo if self.root.xpath(f"count(*[{p}])") == self.n)

    def projector(self, paths: frozenset[str]) -> Callable[[etree._Element], str]:
        """The projection's text of an item, as ``ProjectInstance`` and serialising would give.

        Without namespaces in the batch the pruned item is written straight to text (kept
        subtrees serialised in place, no copies); otherwise it is built as the inline operator
        builds it.
        """
        prune = ProjectInstance(alg.Project(paths))
        if self.namespaced:
            return lambda item: etree.tostring(prune.push(item)[0], encoding="unicode")
        whole, prefixes = prune.whole, prune.prefixes

        def text(el: etree._Element, at: tuple[str, ...]) -> str:
            parts = []
            for child in el:
                tag = child.tag
                if not isinstance(tag, str):
                    continue
                here = at + (tag,)
                if here in whole:
                    parts.append(etree.tostring(child, encoding="unicode", with_tail=False))
                elif here in prefixes:
                    parts.append(text(child, here))
            return f"<{el.tag}>{''.join(parts)}</{el.tag}>" if parts else f"<{el.tag}/>"

        return lambda item: text(item, ())

    def column(self, path: str) -> Column:
        col = self._columns.get(path)
        if col is None:
            col = self._columns[path] = self._extract(path)
        return col

    def _extract(self, path: str) -> Column:
        if path == alg.WHOLE_ITEM:
            return _doubles([string_value(el) for el in self.items])
        if self.root is not None and self.n:
            self.prepare([path])
            if path in self._single:  # every item has it: n elements in all means one each
                found = list(self.root.iter(path.rsplit("/", 1)[-1]))
                if len(found) != self.n:
                    found = self.root.xpath("*/" + path)
                if len(found) == self.n:  # a leaf element's string value is its text
                    return _doubles([(el.text or "") if len(el) == 0 else string_value(el) for el in found])
            elif not _simple(path):
                found = self.root.xpath("*/" + path)
                if len(found) == self.n and self.root.xpath(f"count(*[{path}])") == self.n:
                    return _doubles([string_value(el) for el in found])
        return [path_values(el, path) for el in self.items]


def _doubles(texts: list[str]) -> np.ndarray:
    if not texts:
        return np.empty(0)
    if _NUMBER_CHARS.match("".join(texts)):
        try:
            return np.array(texts, dtype=np.float64)
        except ValueError:  # some text is not a number: those cast to NaN, one by one
            pass
    return np.array([cast_double(t) for t in texts], dtype=np.float64)


_NUMPY_OPS = {"=": np.equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}


def _as_lists(col: Column) -> list[list[float]]:
    if isinstance(col, np.ndarray):
        return [[x] for x in col.tolist()]
    return col


def atom_mask(batch: ItemBatch, atom: alg.Atom) -> np.ndarray:
    """The atom on every item: existential over repeated elements, NaN compares false."""
    c = float(atom.constant)
    left = batch.column(atom.left)
    right = None if atom.right is None else batch.column(atom.right)
    if isinstance(left, np.ndarray) and (right is None or isinstance(right, np.ndarray)):
        return _NUMPY_OPS[atom.op](left, c if right is None else right + c)
    lefts = _as_lists(left)
    rights = [[c]] * batch.n if right is None else [[y + c for y in ys] for ys in _as_lists(right)]
    return np.fromiter((any(compare(atom.op, x, y) for x in xs for y in ys)
                        for xs, ys in zip(lefts, rights)), dtype=bool, count=batch.n)


def first_values(col: Column) -> np.ndarray:
    if isinstance(col, np.ndarray):
        return col
    return np.array([v[0] if v else math.nan for v in col], dtype=np.float64)


# ============================================================================ panes


def pane_partials(batch: ItemBatch, rows: np.ndarray, panes: np.ndarray,
                  partials: tuple[alg.Partial, ...]) -> list[tuple[int, list]]:
    """Per pane (ascending), the partial aggregates of the given rows, summed left to right."""
    if rows.size == 0:
        return []
    uniq, inv = np.unique(panes, return_inverse=True)
    counts = np.bincount(inv, minlength=uniq.size)
    out: list[list] = [[] for _ in range(uniq.size)]
    for fn, element in partials:
        if fn == "count" and element == alg.WHOLE_ITEM:
            values = counts.tolist()
        else:
            values = _aggregate_column(fn, batch.column(element), rows, inv, uniq.size)
        for slot, value in zip(out, values):
            slot.append(value)
    return list(zip(uniq.tolist(), out))


def _aggregate_column(fn: str, col: Column, rows: np.ndarray, inv: np.ndarray, k: int) -> list:
    if isinstance(col, np.ndarray):
        v = col[rows]
        if fn == "count":
            return np.bincount(inv, minlength=k).tolist()
        if fn == "sum":
            acc = np.full(k, -0.0)  # -0.0 + x is x, also for x = -0.0
            np.add.at(acc, inv, v)  # sequential, left to right within each pane
            return acc.tolist()
        acc = np.full(k, math.inf if fn == "min" else -math.inf)
        with np.errstate(invalid="ignore"):
            (np.minimum if fn == "min" else np.maximum).at(acc, inv, v)  # propagates NaN, as XQuery
        return acc.tolist()
    groups: list[list[float]] = [[] for _ in range(k)]
    for r, g in zip(rows.tolist(), inv.tolist()):
        groups[g].extend(col[r])
    return [_aggregate(fn, g) for g in groups]


def time_panes(refs: np.ndarray, width: Fraction) -> np.ndarray:
    """Pane of each reference value, exactly as the window bounds compare (``float(p·g) ≤ x``)."""
    num, den = width.numerator, width.denominator
    p = np.floor(refs * den / num)
    lower = p * num / den
    p = np.where(refs < lower, p - 1, p)
    upper = (p + 1) * num / den
    p = np.where(refs >= upper, p + 1, p)
    return p.astype(np.int64)


# ============================================================================ evaluation


@dataclass
class ChainOutput:
    items: list[tuple[int, str]] = field(default_factory=list)  # (offset, xml)
    panes: list[tuple[int, list]] = field(default_factory=list)  # (pane, partial values)
    records: list[tuple[int, str]] = field(default_factory=list)  # (offset, record xml)


def evaluate_chain(chain: Chain, batch: ItemBatch, offsets: np.ndarray, cursor: Cursor,
                   lateness: float) -> ChainOutput:
    """One chain over one batch of its parent's items (``offsets`` ascending, one per item)."""
    out = ChainOutput()
    live = offsets >= chain.start
    if chain.input_kind == "records":
        out.records = [(int(o), batch.texts[i]) for i, o in enumerate(offsets.tolist()) if live[i]]
        return out
    mask = live.copy()
    for atom in chain.atoms:
        if not mask.any():
            break
        mask &= atom_mask(batch, atom)
    rows = np.flatnonzero(mask)
    if chain.window is None:
        if chain.project is None:
            out.items = [(int(offsets[r]), batch.texts[r]) for r in rows.tolist()]
        else:
            project = batch.projector(chain.project)
            out.items = [(int(offsets[r]), project(batch.items[r])) for r in rows.tolist()]
        return out
    assert isinstance(chain.window, alg.WindowAggregate)
    spec = chain.window.window
    width = pane_width(spec)
    if spec.kind == "count":
        ordinals = cursor.seen + np.arange(rows.size, dtype=np.int64)
        cursor.seen += int(rows.size)
        panes = ordinals // int(width)
    else:
        assert spec.ref is not None
        refs = first_values(batch.column(spec.ref))[rows]
        valid = np.isfinite(refs)
        cursor.missing += int(rows.size - valid.sum())
        rows, refs = rows[valid], refs[valid]
        if rows.size:
            running = np.maximum.accumulate(refs)
            before = np.concatenate(([cursor.high], np.maximum(running[:-1], cursor.high)))
            on_time = ~(refs < before - lateness)
            cursor.late += int(rows.size - on_time.sum())
            cursor.high = max(cursor.high, float(running[-1]))
            rows, refs = rows[on_time], refs[on_time]
        panes = time_panes(refs, width)
    out.panes = pane_partials(batch, rows, panes, chain.window.partials)
    return out
