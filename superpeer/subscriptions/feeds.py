"""The live inputs of a subscription's post-processing: feeds the data plane appends to and the
evaluation reads, blocking for more until the stream ends (``runtime``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from wxquery import ast


class BlockingFeed:
    """An iterable input that blocks for more items until the stream ends.

    A replayable feed can be iterated several times (a join's inner input): later iterations
    replay what was already received, then wait for more like the first. A single-pass feed
    hands each item over once and keeps nothing that was read.
    """

    def __init__(self, replay: bool = True) -> None:
        self._items: list = []
        self._ended = False
        self._discarded = False
        self._replay = replay
        self._iterated = False
        self._cond = threading.Condition()
        # called (by the reading thread, without the lock) before it waits for more items: the
        # results computed so far leave then, in one batch, rather than one at a time
        self.before_wait: Callable[[], None] | None = None

    def feed(self, values: list, end: bool = False) -> None:
        with self._cond:
            if self._discarded:
                return
            self._items.extend(values)
            self._ended = self._ended or end
            self._cond.notify_all()

    def discard(self) -> None:
        """Nothing will read this input any more: free what it holds, ignore what comes."""
        with self._cond:
            self._discarded = self._ended = True
            self._items = []
            self._cond.notify_all()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator:
        if not self._replay:
            return self._drain()
        return self._replayed()

    def _drain(self) -> Iterator:
        with self._cond:
            if self._iterated:
                raise RuntimeError("a single-pass input was read twice")
            self._iterated = True
        while True:
            self._about_to_wait(0)
            with self._cond:
                while not self._items and not self._ended:
                    self._cond.wait()
                if not self._items:
                    return
                batch, self._items = self._items, []
            yield from batch

    def _about_to_wait(self, read: int) -> None:
        """``before_wait``, if nothing past ``read`` is here and the input has not ended."""
        if self.before_wait is not None:
            with self._cond:
                waits = len(self._items) <= read and not self._ended
            if waits:
                self.before_wait()

    def _replayed(self) -> Iterator:
        i = 0
        while True:
            self._about_to_wait(i)
            with self._cond:
                while i >= len(self._items) and not self._ended:
                    self._cond.wait()
                if i >= len(self._items):
                    return
                batch = self._items[i:]
            i += len(batch)
            yield from batch


def single_pass_clauses(body: ast.Expr) -> set[int]:
    """Ids of the for clauses the evaluation iterates once: the first clause of each FLWR that
    is not inside another FLWR (element constructors, sequences and if-branches at the top
    are evaluated once). Any other clause runs once per binding of the clauses around it."""
    return {id(f.clauses[0]) for f in ast.top_level_flwrs(body)
            if f.clauses and isinstance(f.clauses[0], ast.ForClause)}
