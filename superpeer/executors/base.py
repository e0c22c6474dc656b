"""The executor interface: where a super-peer runs the operators of the streams it produces.

The node hands each derived stream's operator chain to its executor (``install``), pushes every
parent stream's items into it once per batch (``push``), and receives each derived stream's
output, in order and numbered, through the ``deliver`` callback it built the executor with
(``make_executor``). An executor is a long-lived part: ``start`` and ``stop``. Both executors run the batch
operators of ``wxquery.operators``: ``inline`` in the super-peer process, synchronously;
``spark`` in the scan tasks of one Spark job per micro-batch and in its driver.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

from wxquery.operators import definitions as alg
from wxquery.operators.windows import WindowCounters

# deliver(stream, first sequence number, outputs, end of stream[, origins]): ``origins``, per
# output of a per-item chain, the original's item it came from (``data.origins``), if known
Deliver = Callable[..., None]
# passed(stream, path, value): an asynchronous executor has delivered every output of the items
# pushed before a watermark on the stream's parent (the node hands the mark on along the stream)
Passed = Callable[[str, str, float], None]


def installs_a_copy(copies: set[str], stream: str, operators: tuple, parent: str | None) -> bool:
    """A derived stream without operators is a copy of its parent, which the node duplicates
    itself (``is_copy``): recorded in ``copies``, and nothing is computed for it. Any other
    derived stream is computed from a named parent."""
    if not operators:
        copies.add(stream)
        return True
    assert parent is not None, "a computed stream has a parent"
    return False


class Executor(Protocol):
    name: str
    wants_text: bool  # push needs the wire text (else parsed values); outputs are of the same kind
    synchronous: bool  # a push's outputs are delivered before it returns
    # a count window can be installed held and aligned with another's (``count_alignment``;
    # then also ``install(..., held=True)``, ``count_anchor`` and ``align_count``)
    aligns_count_windows: bool
    busy_s: float  # seconds spent computing so far (``data.stream_rates.ExecutorLoad``)

    def start(self) -> None:
        """Begin: outputs may reach ``deliver`` from now on (a restarted executor hands on again
        what its last checkpoint had not seen delivered)."""
        ...

    def install(self, stream: str, operators: tuple[alg.Operator, ...], parent: str | None = None,
                parent_kind: str = "items") -> None: ...

    def remove(self, stream: str) -> None: ...

    def is_copy(self, stream: str) -> bool:
        """Whether the stream is its parent unchanged (no operators): the node duplicates it."""
        ...

    def needs_values(self, stream: str) -> bool:
        """Whether computing this stream needs its parent's items parsed by the node."""
        ...

    def push(self, parent: str, values: list, texts: list[str] | None, end: bool,
             origins: Sequence[int] | None = None) -> None:
        """The parent's next items; ``origins``: per item, its original's item, when known
        (an executor that can, hands each per-item output on with its input's)."""
        ...

    def advance(self, parent: str, path: str, value: float) -> None:
        """A watermark on ``parent``: event time at element ``path`` reached ``value``; the time
        windows over that element close what it ends, as an item with that value would."""
        ...

    def installed(self) -> list[str]: ...

    def window_counters(self) -> dict[str, WindowCounters]:
        """Per derived stream with a window: items dropped as late or without a reference."""
        ...

    def status(self) -> dict: ...

    def stop(self) -> None: ...
