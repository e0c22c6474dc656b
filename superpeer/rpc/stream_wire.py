"""A peer's table of streams as a lookup answer carries it, printed and read once per stream.

Every registration and re-optimisation round asks the peers on its search for their streams of
an input (``LookupStreams``), and a peer's answer holds every such stream it has: it grows with
the subscriptions the network carries (an answer of 49 streams cost 8 ms of CPU to print and
read: ``benchmarks/lookup_answers.py``). Most of a stream never changes after it is installed
(``sharing.serialization.stream_fixed_to_json``: its id, input, properties, kind, origin, parent
and operators, all frozen values); only its route, estimate, usage, users and replay state do. So that part travels as a JSON text of its own, printed once
per stream at the answering peer (``StaticTexts``) and read once per distinct text at the asking
peer (``StaticParses``); the rest is printed and read with every answer.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from sharing.serialization import (stream_changing_from_json, stream_changing_to_json, stream_fixed_from_json,
                                   stream_fixed_to_json)
from sharing.stream_table import NetworkStream

CACHED = 1 << 14  # streams whose fixed part is kept, printed or read, per process
K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """A bounded map, least recently used first out, safe across the server's threads."""

    def __init__(self, size: int = CACHED) -> None:
        self.size = size
        self._map: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V], valid: Callable[[V], bool] = lambda v: True) -> V:
        with self._lock:
            hit = self._map.get(key)
            if hit is not None and valid(hit):
                self._map.move_to_end(key)
                return hit
        value = make()
        with self._lock:
            self._map[key] = value
            while len(self._map) > self.size:
                self._map.popitem(last=False)
        return value


def _fixed(s: NetworkStream) -> tuple:
    """What the fixed part is printed from (a stream widened in place has new properties)."""
    return (s.properties, s.operators, s.input, s.kind, s.origin, s.parent)


def _static_json(s: NetworkStream) -> str:
    return json.dumps(stream_fixed_to_json(s))


class StaticTexts:
    """The answering side: each stream's fixed part as printed, again only if what it is
    printed from is another value (a stream restored after a restart, or widened in place)."""

    def __init__(self) -> None:
        self._texts: _Lru[str, tuple[tuple, str]] = _Lru()

    def text(self, s: NetworkStream) -> str:
        fixed = _fixed(s)
        return self._texts.get(s.id, lambda: (fixed, _static_json(s)),
                               lambda hit: all(a is b or a == b for a, b in zip(hit[0], fixed)))[1]

    def answer(self, streams: list[NetworkStream]) -> str:
        return json.dumps([{"static": self.text(s), **stream_changing_to_json(s)} for s in streams])


class StaticParses:
    """The asking side: each distinct fixed part read once (the values are frozen, so streams
    made from the same text share them)."""

    def __init__(self) -> None:
        self._parsed: _Lru[str, dict] = _Lru()

    def streams(self, text: str) -> list[NetworkStream]:
        return [NetworkStream(**self._parsed.get(j["static"], lambda: stream_fixed_from_json(json.loads(j["static"]))),
                              **stream_changing_from_json(j))
                for j in json.loads(text)]
