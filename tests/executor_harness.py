"""An in-process harness for executor tests: no daemons, no sleeps without a deadline.

``TestingSource`` is a parent stream given as batches of wire texts with ``EOF`` (the stream
ends) and ``ABORT`` (the executor is stopped here and a new one is made on the same durable state)
points; ``TestingSink`` receives ``deliver`` calls and checks what a node checks: outputs numbered
without gaps, a redelivered number carrying the same output; ``poll`` waits for a condition and
raises, naming what it waited for, when the deadline passes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Union

from superpeer.executors import Deliver, Executor
from wxquery.operators import definitions as alg
from wxquery.operators.windows import WindowCounters


class EOF:
    """The parent stream ends here."""


class ABORT:
    """Stop the executor here; the factory makes the next one (a durable executor resumes)."""


Batch = Union[list[str], type[EOF], type[ABORT]]


@dataclass
class TestingSource:
    __test__ = False  # not a pytest test class

    parent: str
    batches: list[Batch]

    @classmethod
    def of(cls, parent: str, texts: list[str], size: int, abort_after: int | None = None) -> "TestingSource":
        """``texts`` in batches of ``size``, then EOF (and an ABORT after that many batches)."""
        batches: list[Batch] = [texts[i:i + size] for i in range(0, len(texts), size)]
        if abort_after is not None:
            batches.insert(abort_after, ABORT)
        return cls(parent, batches + [EOF])


@dataclass
class TestingSink:
    __test__ = False

    outputs: dict[str, dict[int, str]] = field(default_factory=dict)
    ended: set[str] = field(default_factory=set)

    def deliver(self, stream: str, seq: int, texts: list, end: bool) -> None:
        got = self.outputs.setdefault(stream, {})
        for k, text in enumerate(texts):
            previous = got.setdefault(seq + k, text)
            assert previous == text, f"{stream}: output {seq + k} redelivered with other content"
        if end:
            self.ended.add(stream)

    def items(self, stream: str) -> list[str]:
        got = self.outputs.get(stream, {})
        assert sorted(got) == list(range(len(got))), f"{stream}: outputs are not numbered without gaps"
        return [got[k] for k in range(len(got))]


def poll(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.02) -> None:
    """Until ``condition()`` holds; TimeoutError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(interval)


@dataclass
class Run:
    sink: TestingSink
    counters: dict[str, WindowCounters]


def run_executor(factory: Callable[[Deliver], Executor], chains: dict[str, tuple[alg.Operator, ...]],
                 source: TestingSource, timeout: float = 120.0) -> Run:
    """Install ``chains`` on ``source.parent``, push the batches, wait until every chain ended."""
    sink = TestingSink()

    def start() -> Executor:
        executor = factory(sink.deliver)
        executor.start()
        for stream, operators in chains.items():
            executor.install(stream, operators, parent=source.parent)
        return executor

    executor = start()
    try:
        for batch in source.batches:
            if batch is ABORT:
                executor.stop()
                executor = start()
            elif batch is EOF:
                executor.push(source.parent, [], [], True)
            else:
                executor.push(source.parent, [], list(batch), False)  # type: ignore[arg-type]
        poll(lambda: sink.ended >= set(chains), timeout, f"every chain of {sorted(chains)} ended")
        return Run(sink, executor.window_counters())
    finally:
        executor.stop()
