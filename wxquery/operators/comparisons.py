"""The comparison ``x θ y + c``: its one definition, for every place that evaluates a condition.

A WXQuery condition atom compares untyped element content cast to ``xs:double``
(``values.cast_double``) with a constant, or with another element plus a constant, the way
XQuery's general comparison does: it is **existential** over repeated elements (some x and some
y), **false** when either side has no value, and false whenever a NaN takes part (a value that is
not a number, or missing, never satisfies a condition). The reference evaluator's conditions and
predicates, the per-item and vectorised selections of the executors and the aggregate filters on
window records all call ``Comparison``: its scalar entry point (``holds``) and its vectorised one
(``mask``) apply the same operator of ``THETA`` to the same ``y + c``, so they cannot disagree.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, SupportsFloat

if TYPE_CHECKING:
    import numpy as np

# θ → the comparison. Python's operators compare doubles as IEEE 754 does (NaN false with
# everything, -0 = 0) and, applied to numpy arrays, compare element-wise with the same rules.
THETA: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
# θ on strings: Python compares ``str`` by codepoint, as XQuery's default collation does.
# ... and XQuery's functions on strings that hold or not (``starts-with($e/x, "c")``), by codepoint
STRING_FUNCTIONS: dict[str, Callable[[Any, Any], Any]] = {
    "starts-with": str.startswith, "ends-with": str.endswith, "contains": operator.contains}
STRING_THETA: dict[str, Callable[[Any, Any], Any]] = {**THETA, "!=": operator.ne, **STRING_FUNCTIONS}
# x θ y is y θ' x (θ' the operator mirrored)
MIRRORED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class Comparison:
    """``x θ y + c`` (or ``x θ c``) compiled once per condition atom: θ looked up and the
    constant cast to ``xs:double`` here, not per item."""

    __slots__ = ("constant", "op", "test")

    def __init__(self, op: str, constant: SupportsFloat) -> None:
        self.op = op
        self.test = THETA[op]
        try:
            self.constant = float(constant)
        except OverflowError:  # (a literal beyond the doubles, 1e400: XQuery's INF, as cast)
            self.constant = math.inf if constant > 0 else -math.inf  # type: ignore[operator]

    def holds(self, xs: Iterable[float], ys: Sequence[float] | None = None) -> bool:
        """Whether some x θ some y + c (``ys`` None: some x θ c) — one item's values."""
        test, c = self.test, self.constant
        if ys is None:
            for x in xs:
                if test(x, c):
                    return True
            return False
        if not ys:
            return False
        rights = [y + c for y in ys] if c else ys  # y + 0 compares as y (-0 = 0, NaN stays NaN)
        for x in xs:
            for y in rights:
                if test(x, y):
                    return True
        return False

    def mask(self, xs: np.ndarray, ys: np.ndarray | None = None) -> np.ndarray:
        """Per row, x θ y + c (``ys`` None: x θ c) — one value per row on each side, vectorised."""
        return self.test(xs, self.constant if ys is None else ys + self.constant)


class StringComparison:
    """``x θ "c"`` (or ``x θ y``): some value of the item, as a string (its element's string value, not cast),
    θ the literal by codepoint (XQuery's ``xs:string`` comparison under the default collation).
    False when the item has no value there, as every comparison is. The same entry point
    as ``Comparison``'s scalar one, over strings instead of doubles."""

    __slots__ = ("constant", "op", "test")

    def __init__(self, op: str, constant: str) -> None:
        self.op = op
        self.test = STRING_THETA[op]
        self.constant = constant

    def holds(self, xs: Iterable[str], ys: Sequence[str] | None = None) -> bool:
        """Some x θ "c" — or, given ``ys`` (two elements compared, XQuery's two untyped
        values cast to ``xs:string``), some x θ some y."""
        test, c = self.test, self.constant
        if ys is None:
            if c == "" and self.op in STRING_FUNCTIONS:  # (XQuery: true, even of no value)
                return True
            return any(test(x, c) for x in xs)
        return any(test(x, y) for x in xs for y in ys)


@lru_cache(maxsize=65536)
def comparison(op: str, constant: SupportsFloat | str) -> Comparison | StringComparison:
    """The ``Comparison`` of an atom, made once: a batch evaluates each atom of each chain, and
    casting a ``Fraction`` constant costs more than comparing a thousand doubles. A string
    constant makes a ``StringComparison``."""
    if isinstance(constant, str):
        return StringComparison(op, constant)
    return Comparison(op, constant)
