"""A peer's table of streams as a lookup answer carries it, printed and read once per stream.

Every registration and re-optimisation round asks the peers on its search for their streams of
an input (``LookupStreams``), and a peer's answer holds every such stream it has: it grows with
the subscriptions the network carries, and printing and reading it was most of a
registration's time. Most of a stream never changes after it is installed — its id, input,
properties, kind, origin, parent and operators (all frozen values) — only its route, estimate,
usage, users and replay state do. So that part travels as a JSON text of its own, printed once
per stream at the answering peer (``StaticTexts``) and read once per distinct text at the asking
peer (``StaticParses``); the rest is printed and read with every answer.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from sharing.serialization import (input_from_json, input_to_json, operator_from_json, operator_to_json,
                                   properties_from_json, properties_to_json, usage_from_json, usage_to_json)
from sharing.statistics import StreamEstimate
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
    return json.dumps({"id": s.id, "input": input_to_json(s.input), "properties": properties_to_json(s.properties),
                       "kind": s.kind, "origin": s.origin, "parent": s.parent,
                       "operators": [operator_to_json(o) for o in s.operators]})


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
        return json.dumps([{"static": self.text(s), "route": list(s.route),
                            "estimate": [s.estimate.freq, s.estimate.size], "usage": usage_to_json(s.usage),
                            "users": sorted(s.users), "original": s.original, "past": s.past,
                            "live_from": s.live_from} for s in streams])


class StaticParses:
    """The asking side: each distinct fixed part read once (the values are frozen, so streams
    made from the same text share them)."""

    def __init__(self) -> None:
        self._parsed: _Lru[str, tuple] = _Lru()

    def streams(self, text: str) -> list[NetworkStream]:
        out = []
        for j in json.loads(text):
            sid, inp, props, kind, origin, parent, ops = self._parsed.get(j["static"], lambda: _read_static(j["static"]))
            out.append(NetworkStream(id=sid, input=inp, properties=props, kind=kind, origin=origin, parent=parent,
                                     operators=ops, route=tuple(j["route"]), estimate=StreamEstimate(*j["estimate"]),
                                     usage=usage_from_json(j["usage"]), users=set(j["users"]),
                                     original=j["original"], past=j["past"], live_from=j["live_from"]))
        return out


def _read_static(text: str) -> tuple:
    j = json.loads(text)
    return (j["id"], input_from_json(j["input"]), properties_from_json(j["properties"]), j["kind"], j["origin"],
            j["parent"], tuple(operator_from_json(o) for o in j["operators"]))
