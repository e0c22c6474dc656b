"""The inline executor: the batch operators run in the super-peer process, synchronously.

Every push of a parent's batch is parsed once and evaluated by all chains on that parent
(``wxquery.operators.runner.ChainGroup``); outputs are wire texts, delivered before ``push``
returns. It needs no JVM, so tests that run many peers and the simulator's semantics use it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from wxquery.operators import definitions as alg
from wxquery.operators.batch import warm_up
from wxquery.operators.chains import normalise
from wxquery.operators.count_alignment import Anchor
from wxquery.operators.predicate_index import INDEX_FROM
from wxquery.operators.runner import ChainGroup
from wxquery.operators.windows import WindowCounters

from ..data.narrowing import narrowed_chain, residual_chain
from ..data.origins import picked
from .base import Deliver, installs_a_copy


class InlineExecutor:
    name = "inline"
    wants_text = True
    synchronous = True
    aligns_count_windows = True  # (``count_anchor``, ``align_count``, ``install(held=True)``)

    def __init__(self, lateness: float = 0.0, deliver: Deliver | None = None,
                 index_from: int = INDEX_FROM) -> None:
        self.lateness = lateness
        self.index_from = index_from  # chains on one element before they share an index
        self.groups: dict[str, ChainGroup] = {}  # by parent stream
        self.parents: dict[str, str] = {}  # computed stream -> its parent
        self.copies: set[str] = set()
        self.seqs: dict[str, int] = {}
        self.next_chain = 0
        self.deliver: Deliver = deliver or (lambda stream, seq, out, end: None)
        self.busy_s = 0.0  # (its pushes' CPU time: it runs in the caller's thread, so cores)
        warm_up()  # (what its first push would load, loaded now: before a daemon freezes what it made)

    def start(self) -> None:
        """Nothing to start: a push is evaluated in the caller's thread."""

    def install(self, stream: str, operators: tuple[alg.Operator, ...], parent: str | None = None,
                parent_kind: str = "items", held: bool = False) -> None:
        if installs_a_copy(self.copies, stream, operators, parent) or stream in self.parents:
            return
        chain = normalise(self.next_chain, stream, parent, parent_kind, operators)
        self.next_chain += 1
        self.groups.setdefault(parent, ChainGroup(self.lateness, self.index_from)).add(chain, held=held)
        self.parents[stream] = parent

    def count_anchor(self, stream: str) -> Anchor | None:
        """Where the count window computing ``stream`` stands (``count_alignment``)."""
        parent = self.parents.get(stream)
        return None if parent is None else self.groups[parent].anchor(stream)

    def align_count(self, stream: str, anchor: Anchor) -> None:
        """The held count window computing ``stream`` aligned at ``anchor``; what it closes now
        is delivered (``NotYet``/``Unalignable`` if it cannot be aligned)."""
        parent = self.parents.get(stream)
        if parent is None:
            raise KeyError(stream)
        out = self.groups[parent].align(stream, anchor)
        if out:
            seq = self.seqs.get(stream, 0)
            self.seqs[stream] = seq + len(out)
            self.deliver(stream, seq, out, False)

    def narrow(self, parent: str, residual: tuple[alg.Operator, ...]) -> list[str]:
        """Every chain computed here from ``parent`` reads it, from now on, through the
        residual that makes the narrow stream of the wide one (``data.narrowing``): a stream
        widened in place. Their window state goes on. The streams narrowed."""
        group = self.groups.get(parent)
        if group is None:
            return []
        narrow = residual_chain(residual)
        chains = {s: narrowed_chain(st.chain, narrow) for s, st in group.states.items()}  # (all, or none)
        for stream, chain in chains.items():
            group.states[stream].chain = chain
        group.changed()
        return sorted(chains)

    def rechain(self, stream: str, operators: tuple[alg.Operator, ...]) -> None:
        """The per-item chain computing ``stream`` replaced by ``operators`` (it widens in place):
        the items pushed from now on are computed by the new ones."""
        parent = self.parents[stream]
        group = self.groups[parent]
        old = group.states[stream].chain
        if old.window is not None or old.input_kind != "items":
            raise ValueError(f"{stream} is not computed item by item: it cannot be widened in place")
        group.states[stream].chain = normalise(old.id, stream, parent, "items", operators)
        group.changed()

    def remove(self, stream: str) -> None:
        self.copies.discard(stream)
        parent = self.parents.pop(stream, None)
        if parent is not None:
            self.groups[parent].remove(stream)
            if not len(self.groups[parent]):
                del self.groups[parent]

    def is_copy(self, stream: str) -> bool:
        return stream in self.copies

    def needs_values(self, stream: str) -> bool:
        return False  # the batch operators parse the wire text themselves

    def push(self, parent: str, values: list, texts: list[str] | None, end: bool,
             origins: Sequence[int] | None = None) -> None:
        group = self.groups.get(parent)
        if group is None:
            return
        # (the thread's CPU time, not the wall clock's: waiting for the interpreter lock or for
        # a core that other processes hold is not load the operators put on this peer, and
        # counted so it refused subscriptions on a machine that was merely busy)
        started = time.thread_time()
        outputs = group.push(texts or [], end, origins)
        self.busy_s += time.thread_time() - started
        for child, out in outputs.items():
            if not out and not end:
                continue  # (nothing to deliver: the data plane would only take its lock)
            seq = self.seqs.get(child, 0)
            self.seqs[child] = seq + len(out)
            offsets = group.offsets.get(child)
            if origins is None or offsets is None:
                self.deliver(child, seq, out, end)
            else:  # (where each output came from: ``data.origins``)
                self.deliver(child, seq, out, end, picked(origins, offsets))

    def advance(self, parent: str, path: str, value: float) -> None:
        group = self.groups.get(parent)
        if group is None:
            return
        for child, out in group.advance(path, value).items():
            seq = self.seqs.get(child, 0)
            self.seqs[child] = seq + len(out)
            self.deliver(child, seq, out, False)

    def installed(self) -> list[str]:
        return sorted(self.copies) + sorted(self.parents)

    def window_counters(self) -> dict[str, WindowCounters]:
        out: dict[str, WindowCounters] = {}
        for group in self.groups.values():
            out.update(group.counters())
        return out

    def status(self) -> dict:
        return {"executor": "inline", "pipelines": len(self.parents),
                "malformed_items_dropped": sum(g.malformed for g in self.groups.values())}

    def stop(self) -> None:
        pass
