"""Per-stream statistics and the estimates the cost model needs (paper §3.2).

A super-peer observes the items of every original stream it sees and keeps: average item size,
per element (item-relative path) its average occurrence and serialized size, the stream's
frequency, the average increment of ordered elements (for time-window rates), value histograms
(equi-depth) and a reservoir sample. Estimates for a derived stream are computed from its
properties and the statistics of its original stream: selections and windows measured on the
sample (``sample_estimates``), the histograms for what the sample is too small to show.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

from wxquery.operators import definitions as alg
from wxquery.operators.items import atom_test
from wxquery.operators.records import WindowRecord
from wxquery.stream_document import string_value
from wxquery.values import cast_double

from .histogram import Histogram
from .predicate_graph import ZERO, graph_of
from .properties import InputProperties, Selection
from .sample_estimates import sample_columns, sampled_selectivity, window_rate_and_size

RESERVOIR = 2048
SAMPLE_ITEM_MAX_BYTES = 8 << 10  # bigger items are sampled by their leaf values only (the
# statistics a planner fetches hold up to 512 sample items: at most 4 MiB)
# Elements observed per item: a huge item's element statistics come from its first ones, so that
# observing it costs milliseconds, not the seconds a walk over millions of elements would take.
MAX_WALKED_ELEMENTS = 10_000
# never in an item without attributes, namespaces, escapes, comments or PIs (``_walk``)
_NOT_PLAIN = (b'="', b"xmlns", b"&", b"<!", b"<?", b"\r")
# Before any item is observed (a subscription waiting for its stream), plans still need sizes:
DEFAULT_ITEM_SIZE = 256.0
DEFAULT_ATOM_SELECTIVITY = 0.5
AGGREGATE_FILTER_SELECTIVITY = 0.5
REFRESH = 1 / 64  # estimates are recomputed once this share more items were observed


@dataclass
class ElementStats:
    occurrences: int = 0
    total_bytes: int = 0
    items_with: int = 0


@dataclass
class Increment:
    """Running differences of an ordered element (how fast a time window's reference advances)."""

    last: float | None = None
    total: float = 0.0
    count: int = 0  # the items ``total`` advanced over (not all of them observed)
    ordered: bool = True
    last_index: int | None = None  # the stream's number of the item ``last`` is of (None: not known)


@dataclass
class StreamEstimate:
    """What a stream costs to carry: items per second and bytes per item."""

    freq: float
    size: float

    @property
    def bits_per_second(self) -> float:
        return self.freq * self.size * 8


SAMPLE_TEXT_MAX = 256  # a large item's leaf text kept in its sample's skeleton up to this length


def _sample_copy(item: etree._Element, values: dict[str, float], size: int) -> etree._Element:
    """A reservoir entry that keeps nothing else alive: the item copied into a document of its
    own (the observed element may be one node of a whole batch's tree, which it would pin in
    memory), or for an item over ``SAMPLE_ITEM_MAX_BYTES`` only its first leaf values and the
    attributes of the elements on the way to them, which is what predicates relating two
    elements, string and attribute filters are evaluated on."""
    if size <= SAMPLE_ITEM_MAX_BYTES:
        return copy.deepcopy(item)
    skeleton = etree.Element(item.tag, item.attrib)  # (with the attributes on the way: filters read them)
    nodes: dict[str, etree._Element] = {"": skeleton}
    for path, value in values.items():
        if "@" in path:  # (an attribute: kept with its element, below)
            continue
        parent, prefix, original = skeleton, "", item
        for name in path.split("/"):
            prefix = f"{prefix}/{name}"
            original = original.find(name) if original is not None else None
            node = nodes.get(prefix)
            if node is None:
                node = nodes[prefix] = etree.SubElement(parent, name, original.attrib if original is not None else {})
            parent = node
        if original is not None and len(original) == 0 and len(original.text or "") <= SAMPLE_TEXT_MAX:
            parent.text = original.text  # (as written: a string filter compares it)
        elif not math.isnan(value):
            parent.text = repr(value)
    return skeleton


@dataclass
class StreamStatistics:
    """Statistics of one original stream, updated from observed items."""

    frequency: float = 0.0  # items per second (set from the source or from arrival times)
    items: int = 0
    total_bytes: int = 0
    elements: dict[str, ElementStats] = field(default_factory=dict)
    increments: dict[str, Increment] = field(default_factory=dict)
    sample: list[dict[str, float]] = field(default_factory=list)
    sample_items: list[etree._Element] = field(default_factory=list)
    # per sampled item, how many items of the stream it stands for (``observe(weight=…)``)
    sample_weights: list[int] = field(default_factory=list, repr=False)
    seed: int = 0
    _rng: random.Random = field(default_factory=lambda: random.Random(0), repr=False)
    _histograms: dict[str, Histogram] = field(default_factory=dict, repr=False)
    _selectivities: dict[tuple, float] = field(default_factory=dict, repr=False)
    _sizes: dict[frozenset, float] = field(default_factory=dict, repr=False)
    _columns: dict[str, Any] | None = field(default=None, repr=False)
    # per stream: (items per item of the original, items per second besides, bytes per item)
    _estimates: dict[InputProperties, tuple[float, float, float]] = field(default_factory=dict, repr=False)
    _fresh_until: int = 0  # the estimates above hold until this many items were observed
    _snapshot: tuple | None = field(default=None, repr=False)  # (size, values, texts, id) sent to planners
    # statistics received from another peer: their sampled items, parsed only if a predicate
    # needs them (relating repeated elements: rare, and parsing 512 items costs milliseconds)
    parse_sample_items: Callable[[], list[etree._Element]] | None = field(default=None, repr=False)
    sample_id: int = 0  # … and which sample of their peer they hold (``sample_snapshot``)
    _first_arrival: float | None = None
    _last_arrival: float | None = None
    # items whose walk stopped at MAX_WALKED_ELEMENTS: an element past that point may repeat
    # unseen, so none counts as occurring once (``single_elements``)
    truncated_items: int = 0

    # ------------------------------------------------------------------ observing

    def observe(self, item: etree._Element, arrival: float | None = None, index: int | None = None,
                weight: int = 1) -> None:
        """``index``: the item's number in its stream, where not every item is observed (a
        super-peer observes one in 50 of a long stream): an ordered element's difference from
        the last observed item is spread over the items between. ``weight``: how many items
        of the stream it stands for (50 there), which the sample planners get weighs."""
        self.items += 1
        data = etree.tostring(item, encoding="utf-8", with_tail=False)
        size = len(data)
        self.total_bytes += size
        values: dict[str, float] = {}
        seen: set[str] = set()
        self._attributes(item, "", values, seen)
        budget = [MAX_WALKED_ELEMENTS]
        self._walk(item, "", values, seen, budget, not any(m in data for m in _NOT_PLAIN))
        if budget[0] <= 0:
            self.truncated_items += 1
        for path in seen:
            self.elements[path].items_with += 1
        for path, value in values.items():
            inc = self.increments.setdefault(path, Increment())
            if inc.last is not None and not math.isnan(value):
                delta = value - inc.last
                if delta < 0:
                    inc.ordered = False
                else:
                    inc.total += delta
                    between = index - inc.last_index if index is not None and inc.last_index is not None else 1
                    inc.count += max(between, 1)
            inc.last, inc.last_index = value, index
        self._reservoir(values, item, size, weight)
        if arrival is not None:
            if self._first_arrival is None:
                self._first_arrival = arrival
            self._last_arrival = arrival
            if self.items > 1 and self._last_arrival > self._first_arrival:
                self.frequency = (self.items - 1) / (self._last_arrival - self._first_arrival)

    def _walk(self, el: etree._Element, prefix: str, values: dict[str, float], seen: set[str],
              budget: list[int], plain: bool = False) -> int:
        """Count ``el``'s descendants, each element's bytes as ``etree.tostring`` makes them: in a
        ``plain`` item (``_NOT_PLAIN``) summed from its children's, not serialised again at every
        level (most of a sampled item's time). Returns the bytes of ``el``'s children with their
        tails (-1: not summed)."""
        content = 0
        for child in el:
            if budget[0] <= 0:
                return -1
            budget[0] -= 1
            tag = child.tag
            if not isinstance(tag, str):
                content = -1
                continue
            path = f"{prefix}/{tag}" if prefix else tag
            stats = self.elements.setdefault(path, ElementStats())
            stats.occurrences += 1
            seen.add(path)
            if not plain and child.attrib:  # (a plain item has none)
                self._attributes(child, path, values, seen)
            inner = 0
            if len(child):
                inner = self._walk(child, path, values, seen, budget, plain)
            elif path not in values:
                values[path] = cast_double(string_value(child))
            size = (_plain_size(tag, child.text, inner) if plain and inner >= 0
                    else len(etree.tostring(child, encoding="utf-8", with_tail=False)))
            stats.total_bytes += size
            if content >= 0:
                content += size + _utf8_size(child.tail)
        return content

    def _attributes(self, el: etree._Element, prefix: str, values: dict[str, float], seen: set[str]) -> None:
        """An element's attributes, as paths of their own (``pos/@ra``): counted, sized and
        sampled like leaf elements (filters, projections and time windows read them)."""
        for name, value in el.attrib.items():
            if name.startswith("{"):  # (a namespaced attribute: no path names it)
                continue
            path = f"{prefix}/@{name}" if prefix else f"@{name}"
            stats = self.elements.setdefault(path, ElementStats())
            stats.occurrences += 1
            stats.total_bytes += len(name) + len(value) + 4  # ( name="value")
            seen.add(path)
            if path not in values:
                values[path] = cast_double(value)

    def _reservoir(self, values: dict[str, float], item: etree._Element, size: int, weight: int) -> None:
        if self.items >= self._fresh_until:
            self.forget_estimates()
        if len(self.sample) < RESERVOIR:
            self.sample.append(values)
            self.sample_items.append(_sample_copy(item, values, size))
            self.sample_weights.append(weight)
            return
        j = self._rng.randrange(self.items)
        if j < RESERVOIR:
            self.sample[j] = values
            self.sample_items[j] = _sample_copy(item, values, size)
            self.sample_weights[j] = weight

    def forget_estimates(self) -> None:
        """Drop what was computed from the sample. Done after every item while the sample is
        small and then once per ``1/REFRESH`` more items: estimates of a large sample hardly move
        with one item, and recomputing them per item would cost a planner milliseconds per call
        and make two rounds price the same plan differently."""
        self._histograms.clear()
        self._selectivities.clear()
        self._sizes.clear()
        self._estimates.clear()
        self._columns = None
        self._snapshot = None
        self._fresh_until = self.items + max(1, int(self.items * REFRESH))

    def sample_snapshot(self, size: int, text: Callable[[etree._Element], str]) -> tuple[list, list[str], int]:
        """``size`` sampled items' values and ``text``s, drawn each as likely as the stream items
        it stands for (weighted sampling without replacement: the largest keys ``u ** (1/w)``),
        and an id of the snapshot, kept until the estimates are refreshed. The sample's first
        entries are the stream's first items: a photon stream that began with a flare once had
        its energy cuts priced at up to three times their selectivity from those alone."""
        if self._snapshot is None or self._snapshot[0] != size:
            n = len(self.sample)
            picked: Any = range(n)
            if n > size:
                rng = random.Random(self.items)
                weights = self.sample_weights if len(self.sample_weights) == n else [1] * n
                keys = [rng.random() ** (1.0 / w) for w in weights]
                picked = sorted(sorted(range(n), key=keys.__getitem__)[-size:])
            self._snapshot = (size, [self.sample[k] for k in picked],
                              [text(self.sample_items[k]) for k in picked], random.getrandbits(62) + 1)
        return self._snapshot[1], self._snapshot[2], self._snapshot[3]

    def take_counters(self, other: StreamStatistics) -> None:
        """The counters of ``other``, a newer answer about the same sample (``same_sample``)."""
        self.frequency, self.items, self.total_bytes = other.frequency, other.items, other.total_bytes
        self.elements, self.increments = other.elements, other.increments
        self.truncated_items = other.truncated_items

    def columns(self) -> dict[str, Any]:
        """Per element, its value in each sampled item (``sample_estimates.sample_columns``)."""
        if self._columns is None:
            self._columns = sample_columns(self)
        return self._columns

    # ------------------------------------------------------------------ element statistics

    @property
    def avg_item_size(self) -> float:
        return self.total_bytes / self.items if self.items else DEFAULT_ITEM_SIZE

    def occurrence(self, path: str) -> float:
        s = self.elements.get(path)
        return s.occurrences / self.items if s and self.items else 0.0

    def element_size(self, path: str) -> float:
        s = self.elements.get(path)
        return s.total_bytes / s.occurrences if s and s.occurrences else 0.0

    @property
    def repeated_elements(self) -> frozenset[str]:
        """Elements that occur more than once in some item: predicates on them are not reasoned
        about (DESIGN.md §4)."""
        return frozenset(p for p, s in self.elements.items() if s.occurrences > s.items_with)

    @property
    def single_elements(self) -> frozenset[str]:
        """Elements observed and never seen more than once in an item: comparisons of them are
        reasoned about with one value each (``sharing.repetition``); any other element may repeat.
        Nothing once an item was too large to walk whole: what lay past its walk may repeat."""
        if self.truncated_items:
            return frozenset()
        return frozenset(p for p, s in self.elements.items() if s.occurrences == s.items_with)

    def avg_increment(self, path: str) -> float | None:
        inc = self.increments.get(path)
        if inc is None or not inc.ordered or inc.count == 0:
            return None
        return inc.total / inc.count

    def histogram(self, path: str) -> Histogram:
        h = self._histograms.get(path)
        if h is None:
            h = Histogram.from_values([v[path] for v in self.sample if path in v])
            self._histograms[path] = h
        return h

    # ------------------------------------------------------------------ estimates

    def selectivity(self, selection: Selection | None) -> float:
        """Fraction of items a selection keeps.

        Pure range predicates (``x θ c``) use the histograms, assuming independent elements;
        predicates relating two elements, string comparisons and paths through a name test
        are evaluated on the reservoir sample's items.
        """
        if selection is None or not selection.atoms:
            return 1.0
        if not self.items:
            return DEFAULT_ATOM_SELECTIVITY ** len(selection.atoms)
        cached = self._selectivities.get(selection.atoms)
        if cached is None:
            cached = self._selectivities[selection.atoms] = self._selectivity(selection)
        return cached

    def _selectivity(self, selection: Selection) -> float:
        relational = any(a.right is not None or a.on_string or "[" in a.left  # (measured on the items)
                         for a in selection.atoms)
        independent = (DEFAULT_ATOM_SELECTIVITY ** len(selection.atoms) if relational
                       else self._independent_selectivity(selection))
        measured = sampled_selectivity(self, selection, independent) if self.sample else None
        if measured is not None:
            return measured
        if relational:
            items = self.sampled_items()
            tests = [atom_test(a) for a in selection.atoms]
            kept = sum(1 for item in items if all(t(item) for t in tests))
            return max(kept, 0.5) / max(len(items), 1)
        return independent

    def sampled_items(self) -> list[etree._Element]:
        """The sampled items (parsed when first asked for, if they came over the wire)."""
        if self.parse_sample_items is not None:
            self.sample_items, self.parse_sample_items = self.parse_sample_items(), None
        return self.sample_items

    def _independent_selectivity(self, selection: Selection) -> float:
        """Each element's histogram, elements taken as independent: what the sample cannot
        measure (too few of its items kept) is guessed this way."""
        graph = graph_of(selection.atoms)
        if not graph.is_satisfiable():
            return 0.0
        sel = 1.0
        for var in graph.variables:
            lower = graph.tightest(ZERO, var)  # 0 - x ⊴ c  =>  x ⊵ -c
            upper = graph.tightest(var, ZERO)
            lo = -float(lower.c) if lower is not None else -math.inf
            hi = float(upper.c) if upper is not None else math.inf
            element = self.elements.get(var)
            present = element.items_with / self.items if element is not None else 0.0
            sel *= present * self.histogram(var).fraction(lo, hi)
        return max(sel, 0.5 / max(len(self.sample), 1))

    def projected_size(self, output: frozenset[str]) -> float:
        """size(p) = size(s) − Σ over elements not projected of occ(n)·size(n) (paper §3.2),
        counting each dropped subtree once."""
        if alg.WHOLE_ITEM in output or not self.items:
            return self.avg_item_size
        cached = self._sizes.get(output)
        if cached is None:
            cached = self._sizes[output] = self._projected_size(output)
        return cached

    def _projected_size(self, output: frozenset[str]) -> float:
        size = self.avg_item_size
        for path in self.elements:
            kept_or_on_the_way = any(o == path or o.startswith(path + "/") for o in output)
            parent = path.rpartition("/")[0]
            parent_dropped = parent and not any(o == parent or o.startswith(parent + "/")
                                                for o in output)
            covered = any(path.startswith(o + "/") for o in output)
            if not kept_or_on_the_way and not parent_dropped and not covered:
                size -= self.occurrence(path) * self.element_size(path)
        return max(size, 1.0)

    def estimate(self, props: InputProperties) -> StreamEstimate:
        """Frequency and item size of the stream described by ``props`` over this original."""
        if self.sample:
            shape = self._estimates.get(props)
            if shape is None:
                shape = self._estimates[props] = self._shape(props)
            per_item, fixed, size = shape
            return StreamEstimate(self.frequency * per_item + fixed, size)
        return self._guess(props)

    def _shape(self, props: InputProperties) -> tuple[float, float, float]:
        kept = self.selectivity(props.selection) / props.sample
        if props.window is None:
            return kept, 0.0, self.projected_size(props.projection.output)
        return window_rate_and_size(self, props, kept)

    def _guess(self, props: InputProperties) -> StreamEstimate:
        """Before anything was sampled: defaults, and a record of long numbers per window."""
        sel = self.selectivity(props.selection)
        freq = self.frequency * sel / props.sample
        if props.window is None:
            return StreamEstimate(freq, self.projected_size(props.projection.output))
        window = props.window
        if window.kind == "count":
            rate = freq / float(window.step)
        else:
            assert window.ref is not None
            inc = self.avg_increment(window.ref)
            units_per_second = self.frequency * inc if inc else 1.0
            rate = min(freq, units_per_second / float(window.step))
        if props.aggregate_selection is not None:
            rate *= AGGREGATE_FILTER_SELECTIVITY
        record = WindowRecord(10**6, {p: 1.234567891234 for a in props.aggregates
                                      for p in alg.partials_of(a.function, a.element)})
        return StreamEstimate(rate, float(len(record.to_xml())))


def _utf8_size(text: str | None) -> int:
    return 0 if not text else len(text) if text.isascii() else len(text.encode("utf-8"))


def _plain_size(tag: str, text: str | None, content: int) -> int:
    """``etree.tostring``'s bytes of a plain element (``_walk``): ``<tag/>`` or ``<tag>text…</tag>``."""
    tag_bytes = _utf8_size(tag)
    return tag_bytes + 3 if text is None and not content else 2 * tag_bytes + 5 + _utf8_size(text) + content
