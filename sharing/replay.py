"""How to recompute exactly what one input of a subscription has read (issue 13, DESIGN.md §5).

A subscription reads a chain of streams: the original, then streams computed from it (some
installed by other subscriptions it shares them with, each starting wherever the original
stood when it was installed), copies of them on other routes, and its own residual operators.
When its route breaks, its registering super-peer plans it again on a new copy of the original
from its log, and runs every operator of the chain itself (``Planner.replay_plan``). For the
recomputed results to equal the ones the subscriber already has — index for index, with count
windows aligned as they were — the recomputation must start each computed stream of the chain
at the same item as the first run did:

* every stream's items carry stream-wide numbers, and the peer that installs a stream records
  the number of the first parent item it takes (its **anchor**, ``superpeer.data.positions``);
* a ``ReplayInput`` keeps, per computed stream of the chain (a **level**), its operators and the
  number of its first input item, and the number of the first item the subscription read;
* the replay feeds the log from the first level's anchor, and drops at each level the output
  items numbered below the next level's anchor (below the subscription's first item at the
  last): every level sees the items it saw, so it produces what it produced, numbered alike.

Where an anchor is not known (a stream installed before any item passed the peer that made it,
since that process started), there is no ``ReplayInput`` and the re-plan falls back to the
subscription's own operators from the items logged when it was installed — exact unless items
were in flight then.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from wxquery.operators import definitions as alg

from .properties import InputProperties
from .serialization import operator_from_json, operator_to_json, properties_from_json, properties_to_json
from .stream_properties import joined_by
from .stream_table import NetworkStream, lineage


@dataclass(frozen=True)
class ReplayLevel:
    """A computed stream of the chain: what it computes, from which input item on."""

    properties: InputProperties  # relative to the original stream
    kind: str
    operators: tuple[alg.Operator, ...]
    first: int  # the number of the first item of its input it took

    def to_json(self) -> dict:
        return {"properties": properties_to_json(self.properties), "kind": self.kind,
                "operators": [operator_to_json(o) for o in self.operators], "first": self.first}

    @classmethod
    def from_json(cls, j: dict) -> "ReplayLevel":
        return cls(properties_from_json(j["properties"]), j["kind"],
                   tuple(operator_from_json(o) for o in j["operators"]), int(j["first"]))


@dataclass(frozen=True)
class ReplayInput:
    """One input's chain from the original, and where the subscription began reading it."""

    levels: tuple[ReplayLevel, ...]
    read: int  # the number of the first item read (of the last level, or of the original)

    @property
    def start(self) -> int:
        """The first log item to replay."""
        return self.levels[0].first if self.levels else self.read

    def drops(self) -> list[int]:
        """Per level, its output items numbered below this are dropped."""
        return [level.first for level in self.levels[1:]] + [self.read]

    def to_json(self) -> dict:
        return {"levels": [level.to_json() for level in self.levels], "read": self.read}

    @classmethod
    def from_json(cls, j: dict) -> "ReplayInput":
        return cls(tuple(ReplayLevel.from_json(x) for x in j["levels"]), int(j["read"]))


def chain_of(result: str, streams: Mapping[str, NetworkStream]) -> list[NetworkStream] | None:
    """The streams from the original to ``result`` (original first); None if ``streams`` does
    not hold the whole chain."""
    chain = lineage(streams, result)
    if not chain or not chain[-1].original:
        return None
    return chain[::-1]


def resolve(chain: list[NetworkStream], new: set[str], anchors: Mapping[str, int],
            read: int | None) -> ReplayInput | None:
    """The ``ReplayInput`` of a chain (original first, the stream delivered last). ``new``: the
    streams the subscription's plan installed (a new stream on a new one begins with its
    parent's first item); ``anchors``: the recorded anchors; ``read``: the number of the first
    item read, for a delivered stream that already flowed. None if anything is not known."""
    firsts: dict[str, int] = {}
    for parent, s in zip(chain, chain[1:]):
        if s.id in anchors:
            firsts[s.id] = anchors[s.id]
        elif s.id in new and parent.id in new:
            firsts[s.id] = 0 if parent.operators else firsts[parent.id]
        elif not s.operators and s.id not in new:
            firsts[s.id] = firsts.get(parent.id, 0)  # an old copy: only a new stream on it needs it, anchored
        else:
            return None
    last = chain[-1]
    if last.id in new and len(chain) > 1:
        read = 0 if last.operators else firsts[last.id]
    if read is None:
        return None
    levels = tuple(ReplayLevel(s.properties, s.kind, s.operators, firsts[s.id]) for s in chain[1:] if s.operators)
    return ReplayInput(levels, read)


def replay_inputs(parts: list, lineage: Callable[[str], list[NetworkStream]], anchors: Mapping[str, int],
                  reads: Mapping[str, int]) -> dict[str, ReplayInput]:
    """Per input variable of a plan's parts, its ``ReplayInput`` where it can be known."""
    out: dict[str, ReplayInput] = {}
    for p in parts:
        if p.feeds_join or joined_by(p.input_properties):  # (a join placed in the network: recomputed
            continue                                         # at the subscriber from the originals)
        new = {s.id: s for s in p.new_streams}
        known = {s.id: s for s in lineage(p.reused)} | new
        chain = chain_of(p.result_stream, known)
        if chain is None:
            continue
        replay = resolve(chain, set(new), anchors, reads.get(p.result_stream))
        if replay is not None:
            out[p.input_properties.variable] = replay
    return out
