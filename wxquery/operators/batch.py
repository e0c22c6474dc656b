"""A micro-batch of one stream's items, parsed once and read as columns by every chain on it.

Items arrive as wire texts, thousands at a time (a ``Publish``/``Transfer`` batch in the inline
executor, a feed range in a Spark scan task). The batch is parsed in one go; each referenced
element becomes a column — a numpy array when every item has exactly one such element, a list of
values per item otherwise — shared by all chains; selections are vectorised comparisons. The
values follow ``items`` exactly: the same casts (``values``), and atoms are ``comparisons``'
``mask`` on numpy columns and its ``holds`` per item elsewhere.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable, Sequence, Union

import numpy as np
import pyarrow as pa
from lxml import etree

from .comparisons import comparison as compiled
from .definitions import WHOLE_ITEM, Atom
from ..stream_document import string_value
from ..values import cast_double
from .items import Projection, path_strings, path_values, projection_for
from .shapes import ItemShape, match_shapes, shape_of
from .windows import first_reference

Column = Union[np.ndarray, list]  # one float per item, or a list of floats per item

PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
# A child path of plain names: evaluated as XPath, by ``iterchildren`` and by ``iter`` alike.
_SIMPLE_PATH = re.compile(r"[A-Za-z_][\w.-]*(?:/[A-Za-z_][\w.-]*)*\Z")
_SHAPE_MISSES = 16  # a batch whose items have no shape (attributes, comments, …) stops looking
_XPATH_OPERATOR_NAMES = {"and", "or", "div", "mod"}
# Over these characters Python's float() accepts exactly the xs:double literals (no "inf", "nan",
# underscores or Unicode digits, which float() would take and xs:double would not).
_NUMBER_CHARS = re.compile(r"[0-9.eE+\- \t\r\n]*\Z")
_PLAIN_NUMBER_CHARS = re.compile(r"[0-9.eE+\-]*\Z")


def _simple(path: str) -> bool:
    return bool(_SIMPLE_PATH.match(path)) and not _XPATH_OPERATOR_NAMES & set(path.split("/"))


class ItemBatch:
    """The parsed items of one batch of one input stream, with cached element columns.

    ``texts`` is any sequence of the items' wire texts (read only for items a chain passes on);
    ``joined``, the same items concatenated as UTF-8, makes the batch a tree even where the
    items have known shapes (the two ways agree; tests compare them).
    """

    valid: np.ndarray | None = None  # rows whose item parsed (None: all of them)
    malformed = 0  # items that did not parse

    def __init__(self, texts: Sequence[str], joined: bytes | None = None) -> None:
        self.texts = texts
        self.n = len(texts)
        self._joined = joined
        self._root: etree._Element | None = None
        self._items: list[etree._Element] | None = None
        # items of known shapes need no tree at all: their columns are read off their texts
        self.shaped = match_shapes(texts) if joined is None and self.n else None
        if self.shaped is None:
            self._parse()
        self._columns: dict[str, Column] = {}
        self._strings: dict[str, list[list[str]]] = {}
        self._checked: set[str] = set()
        self._single: set[str] = set()  # simple paths every item has
        self._projectors: dict[frozenset[str], Callable[[int], str]] = {}

    @property
    def joined(self) -> bytes:
        if self._joined is None:
            self._joined = "".join(self.texts).encode("utf-8")
        return self._joined

    @property
    def namespaced(self) -> bool:
        return b"xmlns" in self.joined or b"{" in self.joined  # "{": Clark notation in a tag

    @property
    def attributes(self) -> bool:
        return b"=" in self.joined  # no "=" anywhere: certainly no attribute

    @property
    def root(self) -> etree._Element | None:
        """The batch as one tree (None when some item did not parse)."""
        if self._items is None:
            self._parse()
        return self._root

    @property
    def items(self) -> list[etree._Element]:
        if self._items is None:
            self._parse()
        assert self._items is not None
        return self._items

    def _parse(self) -> None:
        try:
            root = etree.fromstring(b"<b>" + self.joined + b"</b>", parser=PARSER)
            items = list(root.iterchildren(etree.Element))  # not comments or PIs between items
            if len(items) != self.n:
                raise ValueError("item count differs")
            self._root = root
        except (etree.XMLSyntaxError, ValueError):
            # a batch with an item that does not parse must not fail as a whole: each item is
            # parsed alone, and one that does not parse is dropped by every chain and counted
            self._root = None
            items = []
            valid = []
            for t in self.texts:
                try:
                    items.append(etree.fromstring(t.encode("utf-8"), parser=PARSER))
                    valid.append(True)
                except etree.XMLSyntaxError:
                    items.append(etree.Element("invalid"))
                    valid.append(False)
            if not all(valid):
                self.valid = np.array(valid, dtype=bool)
                self.malformed = valid.count(False)
        self._items = items

    def prepare(self, paths: Iterable[str]) -> None:
        """Find, in one pass over the batch, which simple paths every item has.

        A path every item has, whose last name occurs exactly n times in the batch, occurs
        exactly once per item, in item order: its column is then read off ``iter(name)``
        without evaluating the path per item.
        """
        if self.shaped is not None:
            return  # columns of shaped items come from their texts
        todo = sorted(p for p in set(paths) - self._checked if _simple(p))
        self._checked.update(todo)
        if self.root is None or not self.n or not todo:
            return
        if self.root.xpath(f"count(*[{' and '.join(todo)}])") == self.n:
            self._single.update(todo)
        elif len(todo) > 1:
            self._single.update(p for p in todo if self.root.xpath(f"count(*[{p}])") == self.n)

    def projector(self, paths: frozenset[str]) -> Callable[[int], str]:
        """The projection's wire text of the item in a row (one projector per batch and projection).

        Items of a known shape are projected from their text (``shapes``), the others from
        their parsed element.
        """
        found = self._projectors.get(paths)
        if found is None:
            found = self._projectors[paths] = _memoised(self._projector(projection_for(paths)))
        return found

    def _projector(self, projection: Projection) -> Callable[[int], str]:
        if self.shaped is not None:
            matches, shapes = self.shaped.matches, self.shaped.shapes
            return lambda row: shapes[row].fill(matches[row], projection)
        texts, items = self.texts, self.items
        if self.namespaced:
            by_element = lambda item: etree.tostring(projection.element(item), encoding="unicode")  # noqa: E731
        else:
            attributes = self.attributes
            by_element = lambda item: projection.text(item, attributes)  # noqa: E731
        last: list[ItemShape | None] = [None]
        misses = [0]  # items in this batch that had no shape: past a few, stop looking

        def project(row: int) -> str:
            text = texts[row]
            shape = last[0]
            if shape is not None:
                out = shape.project(text, projection)
                if out is not None:
                    return out
            if misses[0] < _SHAPE_MISSES:
                shape = shape_of(text)
                out = None if shape is None else shape.project(text, projection)
                if out is not None:
                    last[0] = shape
                    return out
                misses[0] += 1
            return by_element(items[row])

        return project

    def column(self, path: str) -> Column:
        col = self._columns.get(path)
        if col is None:
            col = self._columns[path] = self._extract(path)
        return col

    def _extract(self, path: str) -> Column:
        if "@" in path or "[" in path:  # an attribute or a name test: item by item
            return [path_values(el, path) for el in self.items]
        if self.shaped is not None and (path == WHOLE_ITEM or _simple(path)):
            single, texts = self.shaped.texts(path)
            return _doubles(texts) if single else [[cast_double(t) for t in ts] for ts in texts]
        if path == WHOLE_ITEM:
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

    def strings(self, path: str) -> list[list[str]]:
        """Per item, the string values at ``path``: what a string comparison reads (not cast).
        Off the texts where they hold no reference or carriage return (the parser would
        replace those), else from the tree."""
        col = self._strings.get(path)
        if col is None:
            if self.shaped is not None and (path == WHOLE_ITEM or _simple(path)):  # (no @, no [)
                single, texts = self.shaped.texts(path)
                flat = texts if single else [t for ts in texts for t in ts]
                if not any("&" in t or "\r" in t for t in flat):
                    col = [[t] for t in texts] if single else texts
            if col is None:
                col = [path_strings(el, path) for el in self.items]
            self._strings[path] = col
        return col

    def first_values(self, path: str) -> np.ndarray:
        """Each item's first value at ``path`` (NaN where it has none): a window reference."""
        col = self.column(path)
        if isinstance(col, np.ndarray):
            return col
        return np.array([first_reference(v, float) for v in col], dtype=np.float64)


def _memoised(project: Callable[[int], str]) -> Callable[[int], str]:
    """A row's projection written once, however many chains with that projection pass it on."""
    done: dict[int, str] = {}

    def once(row: int) -> str:
        text = done.get(row)
        if text is None:
            text = done[row] = project(row)
        return text

    return once


def warm_up() -> None:
    """Arrow imports pandas the first time it makes an array of a list (0.2 s on this machine):
    a process that evaluates batches does it before its first batch, so that the first items of
    a stream do not wait for it (measured: the first batch of a new subscription took 173–183 ms
    publish to subscriber over three hops, the others 3–4 ms)."""
    _doubles(["1"])


def _doubles(texts: list[str]) -> np.ndarray:
    """Texts cast to xs:double (NaN where one is not a number). Arrow parses a column 4× faster
    than numpy (one C call for all; numpy calls ``float`` per text) and refuses what is not a
    plain decimal or scientific number (spaces, ``inf``, ``nan`` …): those take the slow path,
    which applies xs:double's rules one text at a time."""
    if not texts:
        return np.empty(0)
    joined = "".join(texts)
    if _PLAIN_NUMBER_CHARS.match(joined):  # not Arrow's "inf", "nan", …
        try:
            return pa.array(texts, type=pa.string()).cast(pa.float64()).to_numpy(zero_copy_only=False,
                                                                                writable=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            pass
    if _NUMBER_CHARS.match(joined):
        try:
            return np.array(texts, dtype=np.float64)
        except ValueError:  # some text is not a number: those cast to NaN, one by one
            pass
    return np.array([cast_double(t) for t in texts], dtype=np.float64)


def _as_lists(col: Column) -> list[list[float]]:
    if isinstance(col, np.ndarray):
        return [[x] for x in col.tolist()]
    return col


def atom_mask(batch: ItemBatch, atom: Atom) -> np.ndarray:
    """The atom on every item: vectorised where both sides are one value per item, else per
    item over its repeated or missing values."""
    comparison = compiled(atom.op, atom.constant)
    if atom.on_string:
        if atom.right is not None:
            return np.fromiter(map(comparison.holds, batch.strings(atom.left), batch.strings(atom.right)),
                               dtype=bool, count=batch.n)
        return np.fromiter(map(comparison.holds, batch.strings(atom.left)), dtype=bool, count=batch.n)
    left = batch.column(atom.left)
    right = None if atom.right is None else batch.column(atom.right)
    if isinstance(left, np.ndarray) and (right is None or isinstance(right, np.ndarray)):
        return comparison.mask(left, right)
    rights = [None] * batch.n if right is None else _as_lists(right)
    return np.fromiter((comparison.holds(xs, ys) for xs, ys in zip(_as_lists(left), rights)),
                       dtype=bool, count=batch.n)


def selection_mask(batch: ItemBatch, atoms: Iterable[Atom], rows: np.ndarray | None = None) -> np.ndarray:
    """The conjunction of atoms on every item (``rows``: a mask to start from)."""
    mask = np.ones(batch.n, dtype=bool) if rows is None else rows.copy()
    for atom in atoms:
        if not mask.any():
            break
        mask &= atom_mask(batch, atom)
    return mask


def selected_rows(batch: ItemBatch, atoms: Iterable[Atom], rows: np.ndarray) -> np.ndarray:
    """Of the given rows (ascending), those on which every atom holds: ``selection_mask``
    restricted to them, the atoms read only there (``predicate_index``'s rows in a key range)."""
    for atom in atoms:
        if not rows.size:
            break
        comparison = compiled(atom.op, atom.constant)
        if atom.on_string:
            strings = batch.strings(atom.left)
            rights = None if atom.right is None else batch.strings(atom.right)
            rows = rows[np.fromiter((comparison.holds(strings[r], None if rights is None else rights[r])
                                     for r in rows.tolist()), dtype=bool, count=rows.size)]
            continue
        left = batch.column(atom.left)
        right = None if atom.right is None else batch.column(atom.right)
        if isinstance(left, np.ndarray) and (right is None or isinstance(right, np.ndarray)):
            keep = comparison.mask(left[rows], None if right is None else right[rows])
        else:
            lefts = _as_lists(left)
            rights = None if right is None else _as_lists(right)
            keep = np.fromiter((comparison.holds(lefts[r], None if rights is None else rights[r])
                                for r in rows.tolist()), dtype=bool, count=rows.size)
        rows = rows[keep]
    return rows
