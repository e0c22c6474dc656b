"""Stream-wide item numbers, wherever a stream flows, and where each stream began.

Every stream's items are numbered once, where they come to be: an original stream's by their
place in the log of the super-peer it is registered at, a computed stream's by the order its
operators produced them, and a copy's are its parent's (the same items on another route). The
number travels with the items — it is the link sequence number of every batch — so each peer
knows the number of the next item of every stream that passes it.

That makes a re-plan exact (``sharing.replay``): when a stream is installed, the peer computing
or copying it records the number of the first parent item it takes (its **anchor**, read under
the lock before any item can reach it), and the subscriber's peer the number of the first item
its subscription reads. Replaying the original's log from the first anchor through the same
operators then reproduces every stream of the chain item for item and number for number, and
the items below each next anchor are dropped — what an uninterrupted run produced, window
aggregates included (GenMig's snapshot-equivalence).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StreamPositions:
    next: dict[str, int] = field(default_factory=dict)  # stream -> number of its next item here
    anchors: dict[str, int] = field(default_factory=dict)  # stream made here -> its first parent item
    skip_below: dict[str, int] = field(default_factory=dict)  # computed here: items dropped below
    pending: dict[str, list[str]] = field(default_factory=dict)  # parent -> streams anchored by its next item

    def advance(self, stream: str, first: int | None, count: int) -> int | None:
        """Items ``first``.. of ``stream`` passed here; returns ``first`` (passed on with them)."""
        if first is None:
            return None
        for child in self.pending.pop(stream, ()):
            self.anchors[child] = first
        self.next[stream] = first + count
        return first

    def anchor(self, stream: str, parent: str, logged: int | None = None) -> int | None:
        """Called under the lock as ``stream`` is installed here on ``parent``: the number of
        the first parent item it will take — ``logged`` for an original registered here, else
        the next one to pass, if any has passed since this process started. Otherwise (a new
        parent, or none of its items here yet) it is the number of the first to arrive: known
        then, for whoever reuses the stream later; None now."""
        at = logged if logged is not None else self.next.get(parent)
        if at is not None:
            self.anchors[stream] = at
        # the first to arrive says it for sure (after a gap, items lost upstream, it is later)
        self.pending.setdefault(parent, []).append(stream)
        return at

    def forget(self, stream: str) -> None:
        for table in (self.next, self.anchors, self.skip_below, self.pending):
            table.pop(stream, None)


def kept_runs(kept: list[bool]) -> list[tuple[int, int]]:
    """The [start, stop) ranges of consecutive kept items: a batch some of whose items were
    dropped goes on as one batch per run, each numbered from its first item, so the numbers of
    the items after a dropped one stay theirs."""
    runs, start = [], None
    for i, k in enumerate([*kept, False]):
        if k and start is None:
            start = i
        elif not k and start is not None:
            runs.append((start, i))
            start = None
    return runs
