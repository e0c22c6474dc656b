"""The contract between a result sink and the loop that feeds it (``runner.deliver_results``).

A sink takes results in order, may hold some back (to fill a file, a POST), and makes them
durable in ``flush``: only then is the offset after them *committed*, recorded where the sink
keeps its state, and confirmed to the super-peer (which may then release them). Results are read
with ``peek`` until then, so a sink killed at any moment loses nothing: started again, it goes on
from its committed offset.

A delivery that was begun and may or may not have arrived (a POST whose answer was lost, a file
renamed just before a crash) is the sink's ``pending`` batch: the runner reads exactly that batch
again and hands it over first, so the receiver sees the same batch with the same key and can drop
the copy.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Protocol


class SinkError(Exception):
    """A sink cannot deliver (and has given up retrying): the message says where and why."""


class ResultSink(Protocol):
    #: what it delivers to, for messages ("directory out/", "webhook https://…")
    description: str

    def committed(self) -> int | None:
        """The offset up to which results were delivered for good; None: no state kept yet."""
        ...

    def pending(self) -> tuple[int, int] | None:
        """(offset, count) of a batch whose delivery was begun and is not known to be complete."""
        ...

    def write(self, offset: int, items: list[str], root: str) -> None:
        """Results ``offset``, ``offset + 1``, … (contiguous with the ones before); the root is
        the subscription's result element. May hold them until ``flush``."""
        ...

    def due(self) -> bool:
        """Whether what is held should be flushed now (enough of it, or held long enough)."""
        ...

    def flush(self) -> int | None:
        """Deliver what is held, durably (retrying as the sink does), and return the committed
        offset (None: nothing was ever committed); raises ``SinkError`` when it gives up."""
        ...

    def close(self) -> None:
        ...


class Held:
    """The results a sink holds until its flush: a contiguous run from ``first``, the oldest
    since ``since`` (monotonic), under the result element ``root``."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.first = 0
        self.root = "results"
        self.since = 0.0

    def continues(self, offset: int) -> bool:
        """Whether results from ``offset`` extend what is held (after a drop they do not: then
        what is held goes first, so that a batch is always a contiguous run)."""
        return not self.items or offset == self.first + len(self.items)

    def add(self, offset: int, items: list[str], root: str) -> None:
        if not self.items:
            self.first, self.since = offset, time.monotonic()
        self.root = root
        self.items.extend(items)

    def full(self, most: int, wait_s: float) -> bool:
        """Whether ``most`` are held, or the oldest has waited ``wait_s``."""
        return bool(self.items) and (len(self.items) >= most or time.monotonic() - self.since >= wait_s)

    def delivered(self, count: int) -> int:
        """The first ``count`` went out; the offset after them."""
        del self.items[:count]
        self.first += count
        self.since = time.monotonic()
        return self.first


class StateFile:
    """A small JSON record replaced atomically (written aside, synced, renamed over the old)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise SinkError(f"{self.path}: not a sink state record ({exc}); move it away to start "
                            "from the subscription's saved offset") from None

    def save(self, record: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        aside = self.path.with_name(self.path.name + ".partial")
        with open(aside, "w") as f:
            json.dump(record, f)
            f.flush()
            os.fsync(f.fileno())
        aside.replace(self.path)
        sync_directory(self.path.parent)


def sync_directory(path: Path) -> None:
    """Make a rename in ``path`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
