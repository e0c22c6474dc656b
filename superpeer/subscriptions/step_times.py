"""Where one registration's time went, step by step, as the super-peer that ran it measured it
in its own process (``status``'s ``registration_ms``, the ``registration_step_seconds`` metric).

A registration is a query's analysis, the lookups of the planning view (other peers' tables and
the inputs' statistics), the planner, and the two phases of its installation (with, between
them, the widening in place of a running stream the plan reads wider); a slow one is
slow in one of them — a peer that answers late, a plan over many streams, a commit that waits
for a replay. Timed from outside (a benchmark in one process, a profiler) the steps of eight
peers share one interpreter and the numbers say little about a deployed network; timed here they
are the network's own. ``other`` is the rest: the state store's writes, taking the inputs, the
wait for another installation at this peer, retries' pauses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")
STEPS = ("analysis", "lookups", "planning", "reserve", "widen", "commit", "other")


@dataclass
class StepTimes:
    """Milliseconds per step, summed over the step's repeats (a plan refused, made again)."""

    started: float = field(default_factory=time.perf_counter)
    ms: dict[str, float] = field(default_factory=dict)
    # the registering thread's CPU time: how much of the total is its own work, not waiting for
    # other peers (or for the interpreter, while other threads hold it)
    cpu_started: float = field(default_factory=time.thread_time)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - start) * 1000

    def timed(self, name: str, f: Callable[..., T], *args) -> T:
        """``f(*args)``, its time counted to step ``name``."""
        with self.step(name):
            return f(*args)

    def done(self) -> dict[str, float]:
        """Each step's milliseconds, ``other`` and the ``total`` from the start to now, and the
        ``thread_cpu`` of the thread that made them (call it in that thread)."""
        total = (time.perf_counter() - self.started) * 1000
        steps = {name: self.ms.get(name, 0.0) for name in STEPS if name != "other"}
        return {k: round(v, 3) for k, v in {**steps, "other": max(0.0, total - sum(steps.values())),
                                             "total": total,
                                             "thread_cpu": (time.thread_time() - self.cpu_started) * 1000}.items()}
