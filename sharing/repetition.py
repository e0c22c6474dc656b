"""Implication between conjunctions whose elements may occur more than once in an item.

XQuery compares a path that steps to an element *existentially*: ``$e/m >= 2`` holds when one of
the item's ``m`` is at least 2, and every comparison of a conjunction may pick another ``m``. A
predicate graph takes one value per node, so over repeated elements it reasons about items that
do not exist: it would let a stream filtered on ``x <= y + 0`` serve ``m >= x + 0 and
m <= y + 0``, and an item with two ``m`` (one below ``x``, one above ``y``) would be lost.

The rule here is XQuery's. A path is *one-valued* when it is the item, an attribute of the item,
or an element (or an attribute of one) that statistics observed and never saw repeat; any other
path is a node of its own in each comparison (``m#0``, ``m#1``: the values that comparison
picked). An atom of the wanted conjunction follows from the given one when, for some choice of
those picked values, the given graph (each comparison its own values, the one-valued paths
shared) implies it. With every path one-valued this is exactly the predicate graph's complete
implication; with repeated ones it is sound, and it still sees every implication by one
comparison (bounds on the same element) and chains through one-valued paths.

Statistics can only say what they observed: a path they have not seen yet counts as repeated,
so a plan made before the first items arrive shares less, never wrongly.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass

from wxquery.operators import definitions as alg
from wxquery.operators.definitions import Atom

from .predicate_graph import graph_of


#: how many choices of picked values are tried per wanted atom, and in all: an atom relating two
#: elements that may repeat has (its comparisons' copies of one) × (of the other) choices, and
#: queries are client input; past the budget an atom counts as not implied (sound: shares less)
CHOICES_PER_ATOM = 64
CHOICES = 4096

_KEY = re.compile(r"""\[(?:[^\]"']|"[^"]*"|'[^']*')*\]""")


def owner(path: str) -> str:
    """The element an attribute path's attribute belongs to (``pos/@ra``: ``pos``; ``@id``: the
    item); any other path is its own."""
    if path.startswith("@"):
        return alg.WHOLE_ITEM
    return path.rsplit("/", 1)[0] if "/@" in path else path


@functools.lru_cache(maxsize=1 << 12)
def _element(path: str) -> str:
    """The element whose repetition decides a path's: its owner, less the keys of its steps (a
    keyed step, ``Param[@name = "RA"]``, selects some of the elements its name does: one at
    most where those occur once)."""
    return _KEY.sub("", owner(path))


@dataclass(frozen=True)
class Repetition:
    """What is known of how often elements occur in one item of a stream. ``single``: the
    element paths observed and never seen more than once in an item; ``every_path_single``:
    reason with one value per path (aggregate names, or an input its user declares so)."""

    single: frozenset[str] = frozenset()
    every_path_single: bool = False

    def one_valued(self, path: str) -> bool:
        if self.every_path_single or path == alg.WHOLE_ITEM:
            return True
        element = _element(path)
        return element == alg.WHOLE_ITEM or element in self.single

    def multi_valued(self, paths) -> list[str]:
        """Those of ``paths`` that may hold more than one value in an item, sorted."""
        return sorted({p for p in paths if p is not None and not self.one_valued(p)})


#: nothing observed yet: every element may repeat (what is sound before statistics)
UNKNOWN = Repetition()
#: one value per path (aggregates of a window, names the user vouches for)
ONE_VALUE_EACH = Repetition(every_path_single=True)


def _apart(atoms: tuple[Atom, ...], repetition: Repetition) -> tuple[tuple[Atom, ...], dict[str, list[str]]]:
    """The atoms with every multi-valued path renamed per comparison (and per side, where a
    comparison names one path twice: ``$e/a < $e/a`` holds on an item with two ``a``), and the
    names each multi-valued path got."""
    renamed: list[Atom] = []
    copies: dict[str, list[str]] = {}

    def name(path: str | None, tag: str) -> str | None:
        if path is None or repetition.one_valued(path):
            return path
        copy = f"{path}#{tag}"
        copies.setdefault(path, []).append(copy)
        return copy

    for i, a in enumerate(atoms):
        left = name(a.left, str(i))
        right = name(a.right, f"{i}r" if a.right == a.left else str(i))
        renamed.append(dataclasses.replace(a, left=left, right=right))
    return tuple(renamed), copies


@functools.lru_cache(maxsize=1 << 14)
def implied_atoms(given: tuple[Atom, ...], wanted: tuple[Atom, ...], repetition: Repetition) -> tuple[bool, ...]:
    """Per atom of ``wanted``: whether every item satisfying ``given`` (as XQuery compares)
    satisfies it. Complete when every path is one-valued, sound always."""
    renamed, copies = _apart(given, repetition)
    written = set(given)
    ok = [False] * len(wanted)
    candidates: list[Atom] = []
    of: list[int] = []
    for j, w in enumerate(wanted):
        if w in written:  # (itself, whatever the values)
            ok[j] = True
            continue
        lefts = [w.left] if repetition.one_valued(w.left) else copies.get(w.left, [])
        rights = ([w.right] if w.right is None or repetition.one_valued(w.right)
                  else copies.get(w.right, []))
        choices = len(lefts) * len(rights)
        if choices > CHOICES_PER_ATOM or len(candidates) + choices > CHOICES:
            continue  # (not implied, as far as the budget looks)
        for left in lefts:
            for right in rights:
                candidates.append(dataclasses.replace(w, left=left, right=right))
                of.append(j)
    if candidates:
        for j, yes in zip(of, graph_of(renamed).implied_atoms(candidates)):
            ok[j] = ok[j] or yes
    return tuple(ok)
