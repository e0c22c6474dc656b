"""Joins placed in the network, at the super-peer where the planner put them (``sharing.join_planning``).

A joined stream (``alg.BandJoin``) is made here from two streams that reach this peer: its
parent, the outer input, and the operator's ``inner`` stream. It is not an executor's chain —
the executors compute one input's operators — but a reader of both inputs, like a
subscription: the data plane delivers each input's items to it (``PeerState.deliveries``), it
runs the band join on them (``wxquery.band_join``) and puts each group it completes into the
data plane as an item of the joined stream (``<join>`` with the outer item and the inner items
of its band), which flows on along its route like any other stream. Watermarks of either
input let it hand groups on without waiting for the next item. Never from an executor's
thread and never unlocked: every call comes from the data plane, with the peer's lock held.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lxml import etree

from sharing.stream_table import NetworkStream
from wxquery.band_join import BandJoinState, Group
from wxquery.operators import definitions as alg
from wxquery.result_content import detached_copy

from ..peer_state import PeerState

GROUP = "join"  # the element of a joined stream's item: the outer item, then the inner items of its band
OUTER, INNER = "outer", "inner"  # the delivery variables of its two inputs

Emit = Callable[..., None]  # ``DataPlane.ingest``: (stream, values, end, serialized, origins=…)


def band_join_of(stream: NetworkStream) -> alg.BandJoin | None:
    """The join a stream is made by, if it is a joined stream."""
    return next((op for op in stream.operators if isinstance(op, alg.BandJoin)), None)


def made_by_reader(table, stream: str) -> bool:
    """Whether ``stream`` is a joined stream (its reader makes it, not the executor: nothing of
    its inputs is pushed into the executor for it — into Spark's durable feed, for nothing)."""
    entry = table.get(stream)
    return entry is not None and band_join_of(entry) is not None


def group_item(group: Group) -> etree._Element:
    """``<join o="…" i="… …">``: the outer item, then the inner items; the attributes say which
    items of their originals they came from, where known (``join_feeds``: where a subscription
    reading the joined stream began, for a re-plan that computes it again from the logs)."""
    item = etree.Element(GROUP)
    if group.origin is not None and group.inner_origins and None not in group.inner_origins:
        item.set("o", str(group.origin))
        item.set("i", " ".join(map(str, group.inner_origins)))
    item.append(detached_copy(group.outer))  # type: ignore[arg-type]
    for inner in group.inner:
        item.append(detached_copy(inner))
    return item


class JoinReader:
    """The two inputs of one joined stream at its peer, and the join between them."""

    def __init__(self, stream: str, op: alg.BandJoin, emit: Emit) -> None:
        self.stream = stream
        self.join = BandJoinState(op.outer_path, op.inner_path, float(op.low), float(op.high), keys=op.keys)
        self.emit = emit
        self.ended = False

    def feed(self, variable: str, values: Sequence, end: bool, origins: Sequence[int] | None = None) -> None:
        if variable == OUTER:
            self._hand_on(self.join.outer(values, origins, end))
        else:
            self._hand_on(self.join.inner(values, end, origins))

    def watermark(self, variable: str, path: str, value: float) -> None:
        self._hand_on(self.join.watermark(path, value, inner=variable == INNER))

    def _hand_on(self, groups: list[Group]) -> None:
        end = self.join.ended and not self.ended
        if not groups and not end:
            return
        self.ended = self.ended or end
        origins = [g.origin for g in groups]
        known = all(o is not None for o in origins)
        self.emit(self.stream, [group_item(g) for g in groups], end, None,
                  origins=origins if known and groups else None)

    def status(self) -> dict:
        return {"stream": self.stream, **self.join.status()}


class NetworkJoins:
    """The joined streams made at this peer: installed when a plan placing a join here commits,
    removed with the stream."""

    def __init__(self, state: PeerState, emit: Emit) -> None:
        self.state = state
        self.emit = emit
        self.readers: dict[str, JoinReader] = {}

    def install(self, stream: NetworkStream) -> None:
        """Called with the lock held, as the participant commits ``stream`` here: its inputs
        are delivered to its join from now on (an input whose end passed already ends it now)."""
        op = band_join_of(stream)
        if op is None or stream.parent is None or stream.id in self.readers:
            return
        reader = self.readers[stream.id] = JoinReader(stream.id, op, self.emit)
        for parent, variable in ((stream.parent, OUTER), (op.inner, INNER)):
            self.state.deliveries.setdefault(parent, []).append((reader, variable))  # type: ignore[arg-type]
        for parent, variable in ((op.inner, INNER), (stream.parent, OUTER)):
            if self.state.table.has_ended(parent):
                reader.feed(variable, [], True)

    def remove(self, stream: str) -> None:
        """Called with the lock held: the joined stream is gone here; its inputs stop feeding it."""
        reader = self.readers.pop(stream, None)
        if reader is None:
            return
        for parent in list(self.state.deliveries):
            kept = [(r, v) for r, v in self.state.deliveries[parent] if r is not reader]
            if kept:
                self.state.deliveries[parent] = kept
            else:
                del self.state.deliveries[parent]

    def status(self) -> list[dict]:
        return [r.status() for r in self.readers.values()]
