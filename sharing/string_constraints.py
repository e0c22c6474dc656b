"""String atoms (``x θ "c"``, θ in ``= != < <= > >=``): satisfiability and implication,
decided exactly (issue 36).

A string comparison compares an element's string value with a literal by codepoint, so per
element a conjunction of them is an interval of the total order of strings with finitely many
points taken out. That order is not dense: the string right after ``s`` is ``s`` followed by
the smallest character, and between ``s`` and ``s + m + … + m`` (k of them) lie only the k - 1
strings in between; every other non-empty interval holds infinitely many strings. Each bound is
therefore normalised to ``lo <= x < hi`` (``x > c`` is ``x >= c + m``, ``x <= c`` is
``x < c + m``) and an interval is satisfiable iff it holds a string that is not taken out —
decided exactly, which makes implication (``A ⇒ b`` iff ``A ∧ ¬b`` is unsatisfiable) sound and
complete for conjunctions of string atoms — over elements that ``A`` compares: a comparison with
an element ``A`` does not mention is never implied, as the element may be missing.

The smallest character is the smallest one XML allows, TAB (U+0009): values come from XML
text, which can hold no other below it. An element is taken to have one value, as the numeric
predicate graphs take it (repeated elements match only when identical, ``matching``); the atoms
a subscription keeps are never rewritten (``StringConstraints.atoms``), which keeps them exact on
repeated elements too. String atoms and numeric atoms on the same element are reasoned about
apart: sound (what is claimed holds), not complete across the two.

Two elements compared with each other as strings (``x < y``, XQuery's comparison of two untyped
values) are implied only by the same comparison, written either way round: sound, and not
complete (``x = y and y = "a"`` does imply ``x = "a"`` on single values; nothing here says so).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from wxquery.operators.comparisons import MIRRORED, STRING_FUNCTIONS
from wxquery.operators.definitions import Atom

SMALLEST = "\t"  # XML's smallest character: the string right after s is s + SMALLEST
LARGEST = "\U0010ffff"
ORDERED = ("=", "!=", "<", "<=", ">", ">=", "starts-with")  # (atoms that are intervals)
PATTERNS = tuple(STRING_FUNCTIONS)
NEGATED = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass(frozen=True)
class StringRange:
    """``lo <= x < hi`` (``hi`` None: unbounded) without the strings of ``out``."""

    lo: str = ""
    hi: str | None = None
    out: frozenset[str] = field(default_factory=frozenset)

    def with_atom(self, op: str, c: str) -> StringRange:
        lo, hi, out = self.lo, self.hi, self.out
        if op == "starts-with":  # [c, the first string after all those starting with c)
            after = after_prefix(c)
            at_least = self.with_atom(">=", c)
            return at_least if after is None else at_least.with_atom("<", after)
        if op in (">", ">="):
            lo = max(lo, c + SMALLEST if op == ">" else c)
        elif op in ("<", "<="):
            bound = c + SMALLEST if op == "<=" else c
            hi = bound if hi is None else min(hi, bound)
        elif op == "=":
            lo, hi = max(lo, c), c + SMALLEST if hi is None else min(hi, c + SMALLEST)
        else:
            out = out | {c}
        # a point taken out at an end moves that end (the string after lo is lo + SMALLEST)
        while lo in out and (hi is None or lo < hi):
            lo += SMALLEST
        while hi is not None and hi.endswith(SMALLEST) and hi[:-1] in out and lo < hi:
            hi = hi[:-1]
        return StringRange(lo, hi, frozenset(s for s in out if lo < s and (hi is None or s < hi)))

    def finite(self) -> list[str] | None:
        """Every string of the interval (before ``out``), or None when there are infinitely many."""
        if self.hi is None:
            return None
        if self.hi <= self.lo:
            return []
        rest = self.hi[len(self.lo):]
        if not self.hi.startswith(self.lo) or rest.strip(SMALLEST):
            return None  # (a string between them that is not lo + SMALLEST… has infinitely many after it)
        return [self.lo + SMALLEST * k for k in range(len(rest))]

    @property
    def satisfiable(self) -> bool:
        strings = self.finite()
        return strings is None or any(s not in self.out for s in strings)


class StringConstraints:
    """The string atoms of a conjunction, per element."""

    def __init__(self, atoms: Iterable[Atom] = ()) -> None:
        self.original = tuple(dict.fromkeys(atoms))
        self.ranges: dict[str, StringRange] = {}
        # two elements compared as strings (``x < y``): matched as written, or mirrored
        self.relations = frozenset(canonical(a) for a in self.original if a.right is not None)
        # per element, the substrings it is said to start with, end with or contain
        self.patterns: dict[str, set[tuple[str, str]]] = {}
        for a in self.original:
            if a.right is None:
                assert isinstance(a.constant, str)
                if a.op in PATTERNS:
                    self.patterns.setdefault(a.left, set()).add((a.op, a.constant))
                if a.op in ORDERED:
                    self.ranges[a.left] = self.ranges.get(a.left, StringRange()).with_atom(a.op, a.constant)
                else:
                    self.ranges.setdefault(a.left, StringRange())

    @property
    def satisfiable(self) -> bool:
        """Exact for the order atoms; with substrings (``contains``, ``ends-with``), unsatisfiable
        only where the order atoms leave finitely many strings and none has them all."""
        for x, r in self.ranges.items():
            if not r.satisfiable:
                return False
            strings = r.finite()
            if strings is not None and x in self.patterns and not any(
                    s not in r.out and all(has(s, op, c) for op, c in self.patterns[x]) for s in strings):
                return False
        return True

    def implies_atom(self, atom: Atom) -> bool:
        """Whether the conjunction implies ``atom`` (every string atom, if it is unsatisfiable).
        Never for an element it does not compare: nothing says it is there (``x >= ""`` holds
        for every value, but not where there is none)."""
        if not self.satisfiable:
            return True
        if atom.right is not None:
            return canonical(atom) in self.relations
        assert isinstance(atom.constant, str)
        op, c = atom.op, atom.constant
        if op in PATTERNS and not c:
            return True  # (XQuery: true of every value, and of none)
        if atom.left not in self.ranges:
            return False
        r = self.ranges[atom.left]
        if op == "starts-with":  # nothing of the range lies below the prefix's strings, nor above
            after = after_prefix(c)
            return not r.with_atom("<", c).satisfiable and (after is None or not r.with_atom(">=", after).satisfiable)
        if op in PATTERNS:  # (sound, not complete: a longer substring said, or finitely many strings)
            strings = r.finite()
            if strings is not None and all(has(s, op, c) for s in strings if s not in r.out):
                return True
            return any(has(t, op, c) for said, t in self.patterns.get(atom.left, ())
                       if said == op or (op == "contains"))
        negated = r.with_atom(NEGATED[op], c)
        return not negated.satisfiable

    def atoms(self) -> list[Atom]:
        """The conjunction as written (each atom once). Not minimised on purpose: an element
        may repeat, and a comparison holds if some value satisfies it, so atoms cannot be merged
        (``x >= "a" and x != "a"`` is not ``x > "a"`` for the values "a" and "0"), nor dropped
        for what the others imply together."""
        return list(self.original)


def canonical(relation: Atom) -> tuple[str, str, str]:
    """Two elements compared as strings, written one way for both ways round (``y > x`` is
    ``x < y``): what identity of such atoms means."""
    x, op, y = relation.left, relation.op, relation.right
    assert y is not None
    if op in (">", ">=") or (op in ("=", "!=") and y < x):
        x, op, y = y, MIRRORED[op], x
    return x, op, y


def after_prefix(c: str) -> str | None:
    """The first string after every string that starts with ``c``: its last character that is
    not the largest, one up, and the rest cut off (None: every string from ``c`` on starts
    with it; ``""`` too, which every string starts with)."""
    head = c.rstrip(LARGEST)
    if not head:
        return None
    return head[:-1] + chr(ord(head[-1]) + 1)


def has(s: str, op: str, c: str) -> bool:
    """Whether ``s`` starts with, ends with or contains ``c`` (the functions the evaluator runs)."""
    return bool(STRING_FUNCTIONS[op](s, c))
