"""Stream entries and the subscriptions that use them: one implementation for the simulator and
for every super-peer daemon (DESIGN.md §1, §5).

A ``StreamTable`` holds streams by id. The simulator's ``NetworkState`` keeps one table for the
whole network; a daemon keeps one for the streams whose route passes it. Both need the same
bookkeeping, so it lives here once:

* **users**: a stream is reference-counted by the subscriptions relying on it; a subscription
  that reuses a stream is also a user of its ancestors (its *lineage*), so releasing one never
  removes a parent another still reads from;
* **derived streams**: which streams are computed from a parent (an index, because the data
  plane asks for every batch);
* **truncation**: a route that ends at a peer nothing needs any more is cut back;
* **usage**: the load and link bandwidth a set of streams takes at one peer;
* **version**: a counter of the changes a planner reads (entries added, removed, routes cut),
  so that a plan made over an older read can be recognised as stale;
* **end of stream**: which streams' ends have already passed (a daemon's table): a consumer
  attached to such a stream afterwards — an operator, a copy, a subscription — will never see
  that end come again, so it must be ended when it is attached, and a second end is ignored.

Pure: no sockets, no threads; callers that share a table between threads lock around it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from wxquery.operators import definitions as alg

from .cost_model import Usage
from .properties import InputProperties, InputStream
from .statistics import StreamEstimate


@dataclass
class NetworkStream:
    id: str
    input: InputStream
    properties: InputProperties  # relative to the original stream
    kind: Literal["items", "records"]
    origin: str
    parent: str | None
    operators: tuple[alg.Operator, ...]
    route: tuple[str, ...]
    estimate: StreamEstimate
    usage: Usage = field(default_factory=Usage)
    users: set[str] = field(default_factory=set)
    original: bool = False
    # filled from a log or an archive (a subscription over the past, or one re-planned after a
    # failure): its items begin before it was installed, so no other subscription reuses it —
    # until the replay has caught up with the log: a copy's ``live_from``, set by the peer that
    # fills it, is the number of its first item that was not replayed (``live_at``)
    past: bool = False
    live_from: int | None = None

    def next_hops(self, peer: str) -> list[str]:
        route = self.route
        return [route[i + 1] for i in range(len(route) - 1) if route[i] == peer]

    def describe(self) -> str:
        ops = "; ".join(map(str, self.operators)) or "forward"
        return f"{self.id} [{ops}] at {self.origin} route {'→'.join(self.route)}"


@dataclass
class PeerUsage:
    """What streams take at one peer: load (cores) and bits/s sent towards each neighbour."""

    load: float = 0.0
    links: dict[str, float] = field(default_factory=dict)

    def to_json(self, peer: str) -> dict:
        return {"peer": peer, "load": self.load, "links": dict(self.links)}


def lineage(streams: Mapping[str, NetworkStream], stream_id: str) -> list[NetworkStream]:
    """A stream and its ancestors up to the original, as far as ``streams`` knows them (a
    daemon's table or a planning snapshot may hold only part of the chain). A join placed in
    the network (``alg.BandJoin``) has a second parent, its inner input: that one's lineage
    follows the chain, since whoever reads the join relies on it as much."""
    out = []
    current = streams.get(stream_id)
    while current is not None:
        out.append(current)
        if current.parent is None:
            break
        current = streams.get(current.parent)
    for s in list(out):
        for op in s.operators:
            if isinstance(op, alg.BandJoin):
                seen = {x.id for x in out}
                out.extend(x for x in lineage(streams, op.inner) if x.id not in seen)
    return out


def usage_at(peer: str, streams: Iterable[NetworkStream]) -> PeerUsage:
    """The load ``streams`` put on ``peer`` and the bandwidth it sends them with per link."""
    usage = PeerUsage()
    for s in streams:
        usage.load += s.usage.peers.get(peer, 0.0)
        for n in s.next_hops(peer):
            usage.links[n] = usage.links.get(n, 0.0) + s.estimate.bits_per_second
    return usage


def link_load(peer: str, streams: Iterable[NetworkStream]) -> dict[str, float]:
    """Bits/s ``streams`` put on each link of ``peer``, both directions together (a link's
    bandwidth is shared). Every stream crossing a link passes both its ends, so each end can
    tell the whole load of the link from its own table."""
    links: dict[str, float] = {}
    for s in streams:
        route = s.route
        for a, b in zip(route, route[1:]):
            if a == peer or b == peer:
                n = b if a == peer else a
                links[n] = links.get(n, 0.0) + s.estimate.bits_per_second
    return links


class StreamTable:
    """Streams by id, their users and the streams derived from each (in installation order)."""

    def __init__(self) -> None:
        self.streams: dict[str, NetworkStream] = {}
        self._derived: dict[str, list[str]] = {}
        self._ended: set[str] = set()
        self.version = 0  # bumped by every change of the entries or their routes

    def __contains__(self, stream_id: object) -> bool:
        return stream_id in self.streams

    def __len__(self) -> int:
        return len(self.streams)

    def __iter__(self) -> Iterator[NetworkStream]:
        return iter(list(self.streams.values()))

    def get(self, stream_id: str | None) -> NetworkStream | None:
        return self.streams.get(stream_id) if stream_id is not None else None

    def add(self, stream: NetworkStream) -> None:
        """Add (or replace) an entry; a derived stream is indexed under its parent."""
        if stream.id not in self.streams and stream.parent is not None:
            self._derived.setdefault(stream.parent, []).append(stream.id)
        self.streams[stream.id] = stream
        self.version += 1

    def discard(self, stream_id: str) -> NetworkStream | None:
        self._ended.discard(stream_id)
        s = self.streams.pop(stream_id, None)
        if s is not None:
            self.version += 1
        if s is not None and s.parent is not None:
            kids = self._derived.get(s.parent, [])
            if stream_id in kids:
                kids.remove(stream_id)
            if not kids:
                self._derived.pop(s.parent, None)
        return s

    def mark_ended(self, stream_id: str) -> bool:
        """Record that the stream's end passed here; False if it had already (or the stream is
        not here), so that each end is handled once."""
        if stream_id not in self.streams or stream_id in self._ended:
            return False
        self._ended.add(stream_id)
        return True

    def has_ended(self, stream_id: str | None) -> bool:
        """Whether the stream's end has already passed here."""
        return stream_id in self._ended

    def derived(self, stream_id: str, at: str | None = None) -> list[str]:
        """Streams computed from ``stream_id`` (only those produced at peer ``at`` if given)."""
        kids = self._derived.get(stream_id, ())
        if at is None:
            return list(kids)
        return [k for k in kids if self.streams[k].origin == at]

    def at(self, peer: str, input_stream: InputStream) -> list[NetworkStream]:
        """The entries of ``input_stream`` whose route passes ``peer``."""
        return [s for s in self.streams.values() if s.input == input_stream and peer in s.route]

    def lineage(self, stream_id: str) -> list[NetworkStream]:
        return lineage(self.streams, stream_id)

    def add_user(self, subscription: str, stream_ids: Iterable[str]) -> None:
        """``subscription`` relies on these streams and on every ancestor present here."""
        for sid in stream_ids:
            for s in self.lineage(sid):
                s.users.add(subscription)

    def release(self, subscription: str) -> list[NetworkStream]:
        """Drop ``subscription`` as a user; the non-original streams left without users are
        removed and returned (in table order)."""
        removed = []
        for s in list(self.streams.values()):
            if subscription in s.users:
                s.users.discard(subscription)
                if not s.users and not s.original:
                    self.discard(s.id)
                    removed.append(s)
        return removed

    def truncate(self, stream_id: str, last: str) -> tuple[str, ...] | None:
        """Cut a stream's route after peer ``last``; returns the new route (None when the
        stream is not here or does not pass ``last``)."""
        s = self.streams.get(stream_id)
        if s is None or last not in s.route:
            return None
        s.route = s.route[: s.route.index(last) + 1]
        self.version += 1
        return s.route

    def usage_at(self, peer: str, extra: Iterable[NetworkStream] = ()) -> PeerUsage:
        """The usage at ``peer`` of every entry, plus ``extra`` streams (e.g. reserved ones)."""
        return usage_at(peer, [*self.streams.values(), *extra])
