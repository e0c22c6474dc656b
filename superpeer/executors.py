"""Executors: where a super-peer runs the operators of the streams it produces.

The node hands each derived stream's operator chain to its executor and pushes the parent
stream's values through it; the executor returns the derived stream's values. ``inline`` runs the
pure-Python operators of ``wxquery.inline_operators`` in the super-peer process (the semantic
reference). The Spark executor of DESIGN.md §6 is to implement the same interface.
"""

from __future__ import annotations

from typing import Protocol

from wxquery import algebra as alg
from wxquery.inline_operators import Pipeline


class Executor(Protocol):
    name: str

    def install(self, stream: str, operators: tuple[alg.Operator, ...]) -> None: ...

    def remove(self, stream: str) -> None: ...

    def is_copy(self, stream: str) -> bool:
        """Whether the stream is its parent unchanged (no operators): no values are needed."""
        ...

    def push(self, stream: str, values: list, end: bool) -> list: ...

    def installed(self) -> list[str]: ...


class InlineExecutor:
    name = "inline"

    def __init__(self) -> None:
        self.pipelines: dict[str, Pipeline] = {}

    def install(self, stream: str, operators: tuple[alg.Operator, ...]) -> None:
        self.pipelines[stream] = Pipeline(operators)

    def remove(self, stream: str) -> None:
        self.pipelines.pop(stream, None)

    def is_copy(self, stream: str) -> bool:
        pipeline = self.pipelines.get(stream)
        return pipeline is not None and not pipeline.stages

    def push(self, stream: str, values: list, end: bool) -> list:
        pipeline = self.pipelines.get(stream)
        if pipeline is None:
            return []
        out: list = []
        for v in values:
            out.extend(pipeline.push(v))
        if end:
            out.extend(pipeline.flush())
        return out

    def installed(self) -> list[str]:
        return list(self.pipelines)


def make_executor(name: str) -> Executor:
    if name == "inline":
        return InlineExecutor()
    raise ValueError(f"executor {name!r} is not available yet; use inline")
