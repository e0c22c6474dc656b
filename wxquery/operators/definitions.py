"""The operator algebra of StreamGlobe as small validated value objects.

These are *definitions*: what an installed operator does, with its parameters. The optimizer
(``sharing``) reasons about them and puts them into plans; the rest of ``wxquery.operators``
implements them, for both executors. Paths are item-relative element paths such as ``coord/cel/ra``;
``.`` is the whole item.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Literal, Optional, Union

from ..values import string_literal
from .comparisons import STRING_FUNCTIONS, STRING_THETA, THETA

WHOLE_ITEM = "."


@dataclass(frozen=True)
class Atom:
    """``left op right + constant`` (``right`` None: ``left op constant``). A ``str`` constant
    makes a string comparison (``left op "text"``, by codepoint, ``!=`` too): untyped element
    content compared with a string literal compares as ``xs:string`` (XQuery 3.1 general
    comparison), never as a number. So do two elements compared without arithmetic
    (``left op right``, constant ``""``): XQuery casts two untyped values to ``xs:string``;
    ``left op right + 0`` compares them as numbers."""

    left: str
    op: str
    right: str | None
    constant: Fraction | str

    def __post_init__(self) -> None:
        if isinstance(self.constant, str):
            if self.op not in STRING_THETA:
                raise ValueError(f"unknown comparison operator {self.op!r}")
            if self.right is not None and (self.constant or self.op in STRING_FUNCTIONS):
                raise ValueError("two elements compared as strings take no constant")
        elif self.op not in THETA:
            raise ValueError(f"unknown comparison operator {self.op!r}")

    @property
    def on_string(self) -> bool:
        """Whether it compares as strings (its constant is a string literal)."""
        return isinstance(self.constant, str)

    def __str__(self) -> str:
        if isinstance(self.constant, str):
            if self.right is not None:
                return f"{self.left} {self.op} {self.right}"
            if self.op in STRING_FUNCTIONS:
                return f"{self.op}({self.left}, {string_literal(self.constant)})"
            return f"{self.left} {self.op} {string_literal(self.constant)}"
        if self.right is None:
            return f"{self.left} {self.op} {format_fraction(self.constant)}"
        sign = "+" if self.constant >= 0 else "-"  # (``+ 0``: compared as numbers, not strings)
        return f"{self.left} {self.op} {self.right} {sign} {format_fraction(abs(self.constant))}"


@dataclass(frozen=True)
class WindowSpec:
    """A window: ``count`` (sizes in items) or ``diff`` over an ordered reference element;
    with a ``key`` path, partitioned by its value: one window sequence per key, as CQL's
    ``PARTITION BY`` (count windows count the key's items; time windows share event time).
    Partitioned by several paths, ``key`` names them as the query does, ``"chip, @src"``
    (``key_paths``): a window sequence per combination of their values, and a window's key is
    then the tuple of them, in that order (``KeyValue``)."""

    kind: Literal["count", "diff"]
    size: Fraction
    step: Fraction
    ref: str | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if self.size <= 0 or self.step <= 0:
            raise ValueError("window size and step must be positive")
        if self.kind == "count" and (self.size.denominator != 1 or self.step.denominator != 1):
            raise ValueError("count windows have whole-number sizes")
        if (self.kind == "diff") != (self.ref is not None):
            raise ValueError("exactly time windows have a reference element")

    @property
    def tiles(self) -> bool:
        """Whether every (size/step)-th window tiles the axis without overlap (Δ mod μ = 0)."""
        return (self.size / self.step).denominator == 1

    def to_json(self) -> dict:
        out = {"type": self.kind, "size": format_fraction(self.size),
               "step": format_fraction(self.step)}
        if self.ref is not None:
            out["ref"] = self.ref
        if self.key is not None:
            out["key"] = self.key
            if len(self.key_paths) > 1:  # (what ``query explain`` shows: each key path on its own)
                out["keys"] = list(self.key_paths)
        return out

    @property
    def key_paths(self) -> tuple[str, ...]:
        """The paths the window is partitioned by, in the query's order (none: it is not)."""
        return tuple(self.key.split(", ")) if self.key is not None else ()

    @property
    def key_set(self) -> frozenset[str]:
        """The key paths as a set: what decides which windows a stream's records can serve."""
        return frozenset(self.key_paths)

    def unkeyed(self) -> WindowSpec:
        """The same window over one key's items."""
        return WindowSpec(self.kind, self.size, self.step, self.ref)

    def __str__(self) -> str:
        by = "" if self.key is None else f" by {self.key}"
        if self.kind == "count":
            return f"|count {format_fraction(self.size)} step {format_fraction(self.step)}{by}|"
        return (f"|{self.ref} diff {format_fraction(self.size)} step "
                f"{format_fraction(self.step)}{by}|")


Partial = tuple[str, str]  # (min|max|sum|count, element) — what an aggregate stream carries

MAX_KEY_PATHS = 64  # a window's key paths: a record's keys are read one by one (``WindowRecord.from_xml``)

# A window's key: the string value of its key path (None: the items without it), or, partitioned
# by several paths, the tuple of their values in ``WindowSpec.key_paths`` order.
KeyValue = Union[str, None, tuple[Optional[str], ...]]


def key_projection(source: WindowSpec, target: WindowSpec) -> Callable[[KeyValue], KeyValue] | None:
    """How a key of ``source``'s windows becomes one of ``target``'s, whose key paths are some
    of the source's (the same in another order, or fewer: the source's windows are then merged
    per target key); None where nothing changes."""
    if source.key_paths == target.key_paths:
        return None
    if not target.key_paths:
        return lambda key: None
    at = [source.key_paths.index(p) for p in target.key_paths]  # (the source has several: else equal)
    if len(at) == 1:
        i = at[0]
        return lambda key: key[i]  # type: ignore[index]
    return lambda key: tuple(key[i] for i in at)  # type: ignore[index]


def partials_of(function: str, element: str) -> tuple[Partial, ...]:
    """avg travels as (sum, count) so that it can be reused for sum, count and coarser windows."""
    if function == "avg":
        return (("sum", element), ("count", element))
    return ((function, element),)


def partial_name(p: Partial) -> str:
    return f"{p[0]}({p[1]})"


@dataclass(frozen=True)
class Select:
    """Keep the items that satisfy every atom."""

    atoms: tuple[Atom, ...]

    def __str__(self) -> str:
        return "σ[" + " and ".join(map(str, self.atoms)) + "]"


@dataclass(frozen=True)
class Project:
    """Keep only the listed elements (and the elements on the way to them)."""

    paths: frozenset[str]

    def __str__(self) -> str:
        return "π[" + ", ".join(sorted(self.paths)) + "]"


@dataclass(frozen=True)
class WindowAggregate:
    """Per window, the partial aggregates listed (items in, window records out)."""

    window: WindowSpec
    partials: tuple[Partial, ...]

    def __str__(self) -> str:
        return f"{self.window} " + ", ".join(map(partial_name, self.partials))


@dataclass(frozen=True)
class CombineWindows:
    """Coarser windows from a finer aggregate stream: Δ' mod Δ = 0, Δ mod μ = 0, μ' mod μ = 0 (or
    the same window); per key from windows per the same keys (in any order), or time windows per
    fewer keys (none: over all items) from time windows per more keys (each window the union of
    its finer keys')."""

    source: WindowSpec
    window: WindowSpec
    partials: tuple[Partial, ...]

    def __post_init__(self) -> None:
        s, w = self.source, self.window
        if s.kind != w.kind or s.ref != w.ref:
            raise ValueError("windows of different kind or reference cannot be combined")
        if s.key_set != w.key_set and not (w.key_set < s.key_set and w.kind == "diff"):
            raise ValueError(f"{w} cannot be computed from {s}: only time windows per keys merge into "
                             "windows per fewer keys or over all items")
        same = (s.size, s.step) == (w.size, w.step)
        if not same and not ((w.size / s.size).denominator == 1 and s.tiles and (w.step / s.step).denominator == 1):
            raise ValueError(f"{w} cannot be computed from {s}")

    def __str__(self) -> str:
        return f"combine {self.source} → {self.window} " + ", ".join(map(partial_name, self.partials))


@dataclass(frozen=True)
class AggregateFilter:
    """Keep window records whose final aggregate values (avg = sum/count) satisfy every atom;
    atoms name aggregates as ``avg(en)``."""

    atoms: tuple[Atom, ...]

    def __str__(self) -> str:
        return "σagg[" + " and ".join(map(str, self.atoms)) + "]"


@dataclass(frozen=True)
class Sample:
    """Keep an item with probability 1/``rate``, decided by a hash of its text (``sampling``):
    a stream the network cannot carry whole, thinned for a subscription that accepts an
    approximate answer (OSCAR). The same item is kept or dropped everywhere, every time."""

    rate: int

    def __post_init__(self) -> None:
        if self.rate < 2:
            raise ValueError(f"a sample keeps 1/rate of the items with rate >= 2, not {self.rate}")

    def __str__(self) -> str:
        return f"sample[1/{self.rate}]"


@dataclass(frozen=True)
class BandJoin:
    """A window join placed in the network (``wxquery.band_join``): per item of the parent
    (the outer input), the items of stream ``inner`` at the same peer within its band
    ``[outer_path + low, outer_path + high]`` on ``inner_path``, as one group — and, with
    ``keys``, only those equal to the outer item on each key (``left``: the inner item's path,
    ``right``: the outer item's, compared as the atom says). Run by the super-peer itself,
    never by an executor."""

    inner: str
    outer_path: str
    inner_path: str
    low: Fraction
    high: Fraction
    keys: tuple[Atom, ...] = ()

    def __str__(self) -> str:
        o = self.outer_path
        keys = "".join(f"; key {k}" for k in self.keys)
        return (f"⋈[{self.inner}: {self.inner_path} within [{o}{offset_text(self.low)}, "
                f"{o}{offset_text(self.high)}]{keys}]")


Operator = Union[Sample, Select, Project, WindowAggregate, CombineWindows, AggregateFilter, BandJoin]


def offset_text(c: Fraction) -> str:
    """A constant added to a path, as written after it: " + 1.5", " - 3", or "" for none."""
    return "" if c == 0 else (" + " if c > 0 else " - ") + format_fraction(abs(c))


def format_fraction(f: Fraction) -> str:
    """A constant as the decimal it was written as (constants come from finite decimals)."""
    f = Fraction(f)
    if f.denominator == 1:
        return str(f.numerator)
    d = f.denominator
    twos = fives = 0
    while d % 2 == 0:
        d //= 2
        twos += 1
    while d % 5 == 0:
        d //= 5
        fives += 1
    if d != 1:
        return f"{f.numerator}/{f.denominator}"
    places = max(twos, fives)
    scaled = f * 10 ** places
    sign = "-" if scaled < 0 else ""
    digits = str(abs(scaled.numerator)).rjust(places + 1, "0")
    return f"{sign}{digits[:-places]}.{digits[-places:]}".rstrip("0").rstrip(".")
