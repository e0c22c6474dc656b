"""Streams in the network and what they use: the stream property tables (DESIGN.md §1, §5).

Every stream — an original one, or one derived for a subscription — is produced at one peer
(its origin, where its operators run) from a parent stream and flows along a route. It is
available for reuse at every peer of its route, so each peer's *stream property table* is the
set of streams whose route passes it. Streams are reference-counted by the subscriptions that
rely on them; unsubscribing releases every stream nothing else uses, and the resources it took.

``NetworkState`` keeps the entries, users and lineage in one ``StreamTable`` (the same code a
super-peer daemon runs for its own table) and adds what only a whole-network view has: the
per-peer index SUBSCRIBE searches, and the running totals of what every link and peer carries.
It implements ``PlanningView`` directly, in process.
"""

from __future__ import annotations

import itertools

from wxquery.operators import definitions as alg

from .backbone import Backbone
from .cost_model import Usage
from .properties import InputProperties, InputStream
from .statistics import StreamEstimate, StreamStatistics
from .stream_table import NetworkStream, StreamTable

__all__ = ["NetworkState", "NetworkStream"]


class NetworkState:
    """All streams of the network and the resources they use, served in process."""

    def __init__(self, backbone: Backbone) -> None:
        self.backbone = backbone
        self.table = StreamTable()
        self.statistics: dict[str, StreamStatistics] = {}
        self.link_used: dict[frozenset[str], float] = {}
        self.peer_used: dict[str, float] = {}
        self.subscription_usage: dict[str, Usage] = {}
        self.subscription_streams: dict[str, set[str]] = {}
        self._ids = itertools.count(1)
        # the stream property tables: (peer, input) -> properties -> streams available there
        self._tables: dict[tuple[str, InputStream], dict[InputProperties, dict[str, NetworkStream]]] = {}
        self._interned: dict[InputProperties, InputProperties] = {}
        self._originals: dict[InputStream, NetworkStream] = {}
        self.deliveries: dict[str, list[tuple[str, str]]] = {}

    @property
    def streams(self) -> dict[str, NetworkStream]:
        """Every stream of the network by id, in installation order (parents first)."""
        return self.table.streams

    # ------------------------------------------------------------------ table interface

    def streams_at(self, peer: str, input_stream: InputStream) -> list[NetworkStream]:
        return [s for group in self._tables.get((peer, input_stream), {}).values()
                for s in group.values()]

    def groups_at(self, peer: str, input_stream: InputStream
                  ) -> dict[InputProperties, dict[str, NetworkStream]]:
        """The table grouped by properties: streams of equal properties carry equal content,
        so one match decides for the whole group."""
        return self._tables.get((peer, input_stream), {})

    def original(self, input_stream: InputStream) -> NetworkStream:
        try:
            return self._originals[input_stream]
        except KeyError:
            raise KeyError(f'unknown stream "{input_stream.stream}"') from None

    def _index(self, s: NetworkStream) -> None:
        s.properties = self._interned.setdefault(s.properties, s.properties)
        self.table.add(s)
        self._index_routes(s)

    def _index_routes(self, s: NetworkStream) -> None:
        for peer in s.route:
            table = self._tables.setdefault((peer, s.input), {})
            table.setdefault(s.properties, {})[s.id] = s

    def _unindex(self, s: NetworkStream) -> None:
        self.table.discard(s.id)
        self._unindex_routes(s)

    def _unindex_routes(self, s: NetworkStream) -> None:
        for peer in s.route:
            table = self._tables.get((peer, s.input), {})
            group = table.get(s.properties, {})
            group.pop(s.id, None)
            if not group:
                table.pop(s.properties, None)

    def new_stream_id(self) -> str:
        return f"s{next(self._ids)}"

    def reached(self, peer: str, stream_id: str) -> int | None:
        return None  # no items flow in process: a stream filled from the past stays past

    # ------------------------------------------------------------------ changes

    def register_original(self, input_stream: InputStream, peer: str, properties: InputProperties,
                          statistics: StreamStatistics) -> NetworkStream:
        if peer not in self.backbone.peers:
            raise KeyError(f"unknown super-peer {peer}")
        self.statistics[input_stream.stream] = statistics
        stream = NetworkStream(
            id=input_stream.stream, input=input_stream, properties=properties, kind="items",
            origin=peer, parent=None, operators=(), route=(peer,),
            estimate=StreamEstimate(statistics.frequency, statistics.avg_item_size), original=True)
        if input_stream in self._originals:
            raise ValueError(f'stream "{input_stream.stream}" is already registered')
        self._originals[input_stream] = stream
        self._index(stream)
        return stream

    def install(self, subscription: str, new_streams: list[NetworkStream], reused: list[str],
                extra: Usage, deliveries: list[tuple[str, str]] = ()) -> None:  # type: ignore[assignment]
        """Add a plan's streams; the reused streams (and their ancestors) gain a user.
        ``deliveries`` are (stream, peer) pairs: where the subscription takes its inputs."""
        self.deliveries[subscription] = list(deliveries)
        for s in new_streams:
            s.users.add(subscription)
            self._index(s)
            self._apply(s.usage, +1)
        self.table.add_user(subscription, reused)
        self.subscription_usage[subscription] = extra
        self._apply(extra, +1)
        self.subscription_streams.setdefault(subscription, set()).update(
            s.id for s in new_streams)

    def unsubscribe(self, subscription: str) -> list[str]:
        """Release what only this subscription used; returns the ids of removed streams."""
        removed = []
        for s in self.table.release(subscription):
            self._apply(s.usage, -1)
            self._unindex_routes(s)
            removed.append(s.id)
        self.deliveries.pop(subscription, None)
        extra = self.subscription_usage.pop(subscription, None)
        if extra is not None:
            self._apply(extra, -1)
        self.subscription_streams.pop(subscription, None)
        return removed

    def needed_peers(self, stream_id: str) -> set[str]:
        """Peers of a stream's route where something still takes it: a derived stream produced
        there, or a subscription delivered there."""
        needed = {self.streams[k].origin for k in self.table.derived(stream_id)}
        needed.update(s.origin for s in self.streams.values()  # (a join's inner input: where it is joined)
                      if any(isinstance(op, alg.BandJoin) and op.inner == stream_id for op in s.operators))
        for deliveries in self.deliveries.values():
            needed.update(peer for sid, peer in deliveries if sid == stream_id)
        return needed

    def truncate(self, stream_id: str, route: tuple[str, ...], usage_of) -> None:
        """Shorten a stream's route (what follows is no longer needed) and its resources."""
        s = self.streams[stream_id]
        self._unindex_routes(s)
        self._apply(s.usage, -1)
        self.table.truncate(stream_id, route[-1])
        s.usage = usage_of(s)
        self._apply(s.usage, +1)
        self._index_routes(s)

    def lineage(self, stream_id: str) -> list[NetworkStream]:
        return self.table.lineage(stream_id)

    def _apply(self, usage: Usage, sign: int) -> None:
        for k, v in usage.links.items():
            self.link_used[k] = max(0.0, self.link_used.get(k, 0.0) + sign * v)
        for k, v in usage.peers.items():
            self.peer_used[k] = max(0.0, self.peer_used.get(k, 0.0) + sign * v)
