"""The one lifecycle every long-lived part of a super-peer has: ``start``, then ``stop``.

Constructors only store what they are given; threads, sockets and JVMs start in ``start``. The
node (``node.Node``, the composition root) lists its parts in the order they depend on each
other; ``Parts.start`` starts them in that order and ``Parts.stop`` stops them in the reverse
one, so that no part is used before it started or after it stopped. A part that fails to start
is stopped (what it had started of itself goes) and so are the ones started before it; a part
that fails to stop does not keep the others running. A ``stop`` copes with a partial start.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

log = logging.getLogger("streamglobe.superpeer")


class Lifecycle(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


class Parts:
    """Named parts, started in order and stopped in reverse order (each at most once)."""

    def __init__(self, parts: Sequence[tuple[str, Lifecycle]]) -> None:
        self.parts = list(parts)
        self.started: list[tuple[str, Lifecycle]] = []

    def names(self) -> list[str]:
        """The parts, in the order they start: what runs, when one asks."""
        return [name for name, _ in self.parts]

    def start(self) -> None:
        for name, part in self.parts:
            try:
                part.start()
            except BaseException:
                log.error("%s did not start: stopping what had started", name)
                self.started.append((name, part))
                self.stop()
                raise
            self.started.append((name, part))

    def stop(self) -> None:
        while self.started:
            name, part = self.started.pop()
            try:
                part.stop()
            except Exception:  # noqa: BLE001 - the other parts must still stop
                log.exception("stopping %s failed", name)
