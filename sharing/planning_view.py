"""Everything SUBSCRIBE reads about the network, as an explicit interface (DESIGN.md §5).

The planner is a pure function of a ``PlanningView``. The simulator's ``NetworkState`` is one
(in process, always current). A super-peer daemon plans over a ``PlanningSnapshot``: its
control plane fetches, *before* the planner starts, the stream property tables of the peers for
the subscription's inputs, the statistics of the original streams and the last known usage, and
the planner then never waits on the network. A peer that could not be asked simply has an empty
table in the snapshot (it offers nothing to reuse).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from .backbone import Backbone
from .properties import InputProperties, InputStream
from .statistics import StreamStatistics
from .stream_table import NetworkStream


class PlanningView(Protocol):
    """What the planner reads; nothing else."""

    @property
    def backbone(self) -> Backbone:
        """Peers (capacities, performance indices), links (bandwidths), routes."""
        ...

    @property
    def link_used(self) -> Mapping[frozenset[str], float]:
        """Bandwidth already used on each link (bit/s)."""
        ...

    @property
    def peer_used(self) -> Mapping[str, float]:
        """Load already used at each peer (cores)."""
        ...

    @property
    def statistics(self) -> Mapping[str, StreamStatistics]:
        """Statistics of each original stream the subscription reads, by stream name."""
        ...

    @property
    def streams(self) -> Mapping[str, NetworkStream]:
        """Every stream the view knows, by id (a reused stream delivered as it is)."""
        ...

    def original(self, input_stream: InputStream) -> NetworkStream:
        """The original stream; ``KeyError`` with a reason when no peer has it registered."""
        ...

    def groups_at(self, peer: str, input_stream: InputStream
                  ) -> Mapping[InputProperties, Mapping[str, NetworkStream]]:
        """The streams of ``input_stream`` available at ``peer``, grouped by properties (equal
        properties carry equal content, so one match decides for the whole group)."""
        ...

    def new_stream_id(self) -> str:
        """An id for a stream a plan creates, unique in the network."""
        ...

    def reached(self, peer: str, stream_id: str) -> int | None:
        """The number of the next item of a stream filled from the past to pass ``peer``
        (None: not known), to tell whether every replayed item has passed there."""
        ...


@dataclass
class PlanningSnapshot:
    """A ``PlanningView`` over data fetched beforehand: pure, so planning cannot block."""

    backbone: Backbone
    new_stream_id: Callable[[], str]
    link_used: dict[frozenset[str], float] = field(default_factory=dict)
    peer_used: dict[str, float] = field(default_factory=dict)
    statistics: dict[str, StreamStatistics] = field(default_factory=dict)
    originals: dict[str, NetworkStream] = field(default_factory=dict)  # by stream name
    tables: dict[tuple[str, InputStream], list[NetworkStream]] = field(default_factory=dict)
    streams: dict[str, NetworkStream] = field(default_factory=dict)
    positions: dict[tuple[str, str], int] = field(default_factory=dict)  # (peer, stream) -> ``reached``
    # subscriptions, and super-peers, whose plans stay as they are whatever is cheaper (joins, the
    # past, re-optimisation off): a re-optimisation's look-ahead does not count on them moving
    staying: frozenset[str] = frozenset()
    # super-peers that run joins placed in the network (``join_planning``; None: every one)
    join_peers: frozenset[str] | None = None

    def add_table(self, peer: str, input_stream: InputStream, found: list[NetworkStream],
                  reached: Mapping[str, int] | None = None) -> None:
        """Record a peer's table for an input; a stream seen at several peers is one object
        (whether a copy filled from the past has caught up is what the peer filling it says).
        ``reached``: per stream filled from the past there, the number of its next item."""
        kept = []
        for s in found:
            merged = self.streams.setdefault(s.id, s)
            if s.origin == peer and s.live_from is not None:
                merged.live_from = s.live_from
            kept.append(merged)
        self.tables[(peer, input_stream)] = kept
        self.positions.update({(peer, sid): n for sid, n in (reached or {}).items()})

    def reached(self, peer: str, stream_id: str) -> int | None:
        return self.positions.get((peer, stream_id))

    def original(self, input_stream: InputStream) -> NetworkStream:
        s = self.originals.get(input_stream.stream)
        if s is None:
            raise KeyError(f'unknown stream "{input_stream.stream}": no super-peer has it registered')
        if s.input != input_stream:
            raise KeyError(f'stream "{input_stream.stream}" has items '
                           f'{"/".join(s.input.items)}, not {"/".join(input_stream.items)}')
        return s

    def groups_at(self, peer: str, input_stream: InputStream
                  ) -> dict[InputProperties, dict[str, NetworkStream]]:
        groups: dict[InputProperties, dict[str, NetworkStream]] = {}
        for s in self.tables.get((peer, input_stream), ()):
            groups.setdefault(s.properties, {})[s.id] = s
        return groups
