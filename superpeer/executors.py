"""Executors: where a super-peer runs the operators of the streams it produces.

The node hands each derived stream's operator chain to its executor (``install``), pushes every
parent stream's items into it once (``push``), and receives each derived stream's output, in
order and numbered, through the ``deliver`` callback. ``inline`` runs the pure-Python operators of
``wxquery.inline_operators`` synchronously in the super-peer process (the semantic reference);
``spark`` (``spark_executor``) runs them all in one Structured Streaming query and delivers from
its micro-batches.
"""

from __future__ import annotations

from typing import Callable, Protocol

from wxquery import algebra as alg
from wxquery.inline_operators import Pipeline

# deliver(stream, first sequence number, outputs, end of stream)
Deliver = Callable[[str, int, list, bool], None]


class Executor(Protocol):
    name: str
    wants_text: bool  # push needs the wire text (else parsed values); outputs are of the same kind

    def set_deliver(self, deliver: Deliver) -> None: ...

    def install(self, stream: str, operators: tuple[alg.Operator, ...], parent: str | None = None,
                parent_kind: str = "items") -> None: ...

    def remove(self, stream: str) -> None: ...

    def is_copy(self, stream: str) -> bool:
        """Whether the stream is its parent unchanged (no operators): the node duplicates it."""
        ...

    def needs_values(self, stream: str) -> bool:
        """Whether computing this stream needs its parent's items parsed by the node."""
        ...

    def push(self, parent: str, values: list, texts: list[str] | None, end: bool) -> None: ...

    def installed(self) -> list[str]: ...

    def status(self) -> dict: ...

    def stop(self) -> None: ...


class InlineExecutor:
    name = "inline"
    wants_text = False

    def __init__(self, lateness: float = 0.0) -> None:
        self.lateness = lateness
        self.pipelines: dict[str, Pipeline] = {}
        self.children: dict[str, list[str]] = {}
        self.seqs: dict[str, int] = {}
        self.deliver: Deliver = lambda stream, seq, out, end: None

    def set_deliver(self, deliver: Deliver) -> None:
        self.deliver = deliver

    def install(self, stream: str, operators: tuple[alg.Operator, ...], parent: str | None = None,
                parent_kind: str = "items") -> None:
        self.pipelines[stream] = Pipeline(operators, lateness=self.lateness)
        if operators and parent is not None:
            self.children.setdefault(parent, []).append(stream)

    def remove(self, stream: str) -> None:
        self.pipelines.pop(stream, None)
        for kids in self.children.values():
            if stream in kids:
                kids.remove(stream)

    def is_copy(self, stream: str) -> bool:
        pipeline = self.pipelines.get(stream)
        return pipeline is not None and not pipeline.stages

    def needs_values(self, stream: str) -> bool:
        return not self.is_copy(stream)

    def push(self, parent: str, values: list, texts: list[str] | None, end: bool) -> None:
        for child in list(self.children.get(parent, ())):
            pipeline = self.pipelines[child]
            out: list = []
            for v in values:
                out.extend(pipeline.push(v))
            if end:
                out.extend(pipeline.flush())
            seq = self.seqs.get(child, 0)
            self.seqs[child] = seq + len(out)
            self.deliver(child, seq, out, end)

    def installed(self) -> list[str]:
        return list(self.pipelines)

    def status(self) -> dict:
        return {"executor": "inline", "pipelines": len(self.pipelines)}

    def stop(self) -> None:
        pass


def make_executor(name: str, peer: str = "", **options) -> Executor:
    """``options``: lateness (both); master, checkpoint_dir, trigger_ms (spark). None: default."""
    options = {k: v for k, v in options.items() if v is not None}
    if name == "inline":
        return InlineExecutor(**{k: v for k, v in options.items() if k == "lateness"})
    if name == "spark":
        from .spark_executor import SparkExecutor

        return SparkExecutor(peer, **options)
    raise ValueError(f"unknown executor {name!r}; use inline or spark")
