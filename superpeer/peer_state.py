"""What one super-peer knows, shared by its data plane and control plane.

The stream property table itself is ``sharing.stream_table.StreamTable`` (the same code the
simulator runs); around it this peer keeps the streams registered here by publishers, the
originals it has heard of elsewhere, where subscriptions take their inputs, and the usage its
neighbours last reported. One re-entrant lock guards all of it, because the data plane pushes
items while the control plane installs and removes streams.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from sharing.analysis import Analysis
from sharing.backbone import Backbone
from sharing.matching import raw_properties
from sharing.properties import InputStream
from sharing.statistics import StreamEstimate, StreamStatistics
from sharing.stream_table import NetworkStream, PeerUsage, StreamTable, usage_at

from .data.event_time import EventTime
from .data.limits import DataLimits
from .control.in_flight import IN_FLIGHT
from .control.transactions import Transactions
from .errors import NodeError
from .history.bounds import HistoryBound
from .history.state_store import StateStore
from .subscriptions.runtime import SubscriptionRuntime


@dataclass
class OriginalState:
    """A stream registered at this peer by a publisher."""

    name: str
    root: str
    item: str
    accepted: int = 0
    rejected: int = 0
    closed: bool = False
    statistics: StreamStatistics = field(default_factory=StreamStatistics)
    rate: float = 0.0
    first_arrival: float = 0.0
    # the stream-wide number the next new item gets when the publisher numbers its batches
    # (``position``): a batch sent again (its reply was lost; ``publish --resume``) is taken once
    next_position: int = 0
    duplicates: int = 0  # numbered items received again and skipped
    logged: int = 0  # accepted items in the stream's log (``state_store``), all taken here
    event_time: EventTime | None = None  # what watermarks advance while it is idle
    publisher: str = ""  # the user who registered it: the only one who may publish to it
    history: HistoryBound | None = None  # how much of its log it keeps (None: the peer's default)
    retained_from: int = 0  # the number of its first item still in the log (``retention``)
    publishing: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


class PeerState:
    def __init__(self, peer: str, backbone: Backbone, limits: DataLimits | None = None,
                 store: StateStore | None = None) -> None:
        self.id = peer
        self.store = store or StateStore(None)
        self.backbone = backbone
        self.limits = limits or DataLimits()
        self.lock = threading.RLock()
        self.table = StreamTable()  # every stream whose route passes this peer
        self.originals: dict[str, OriginalState] = {}  # registered here
        self.known_originals: dict[str, NetworkStream] = {}  # registered anywhere, by name
        self.heard_of: dict[str, float] = {}  # original -> when a heartbeat first told of it
        self.deliveries: dict[str, list[tuple[SubscriptionRuntime, str]]] = {}  # stream -> (sub, var)
        # streams being widened in place, not reusable here until settled -> the widening's transaction
        self.held_for_widening: dict[str, str] = {}
        # stream -> the latest origin and window index it delivered here (``origins.fed_high``)
        self.fed_high: dict[str, tuple[int, int]] = {}
        self.peer_usage: dict[str, dict] = {}  # what other peers last reported
        # bits/s this peer measured going out to each neighbour (``stream_rates.LinkRates``)
        self.measured_links: dict[str, float] = {}
        # cores this peer's executor measurably spends (``stream_rates.ExecutorLoad``; None: not yet)
        self.measured_load: float | None = None
        # neighbours the outbound link to which holds half its bound or more (back-pressure)
        self.pressured_links: list[str] = []
        # subscriptions registered here whose plans stay whatever is cheaper, or this peer's id
        # if none moves (``Reoptimiser.stays``): told to the others in the usage report
        self.staying: frozenset[str] = frozenset()
        # whether joins placed in the network run here (``data.network_joins``; not with
        # --no-network-joins): told in the usage report, so that planners place joins only there
        self.runs_joins = False
        # original -> its statistics as planning here last fetched them (their sample is not
        # fetched again until it changes: ``statistics_to_json``)
        self.statistics_held: dict[str, StreamStatistics] = {}
        # per input, the peers its streams reached at the last scoped lookup (``remote_view``):
        # asked at once the next time, rather than found again wave by wave
        self.lookup_reach: dict[InputStream, frozenset[str]] = {}
        # per input, its streams as lookups here last saw them (``remote_view.Seen``), so that
        # a registration's search asks at once the peers of those that serve it
        self.lookup_seen: dict[InputStream, dict] = {}
        self.peer_pins: dict[str, dict[str, int]] = {}  # the first item of each stream their subscriptions need
        self.round_heard: dict[str, float] = {}  # peer -> when it made the record its pins came in
        # subscription -> (when its plan was committed here, the first item of each stream here it reads)
        self.commit_pins: dict[str, tuple[float, dict[str, int]]] = {}
        # the installations in flight here: reservations, leases, holders, replays held
        self.transactions = Transactions(self.lock)

    @property
    def version(self) -> int:
        """Changes here that a planner reads (entries, routes, reservations); equal versions
        mean that a plan made over the older read still sees this peer as it is."""
        return self.table.version + self.transactions.granted

    def derived_here(self, stream: str) -> list[str]:
        """Streams this peer computes (or duplicates) from ``stream``."""
        return self.table.derived(stream, at=self.id)

    def local_streams(self, input_stream: InputStream) -> list[NetworkStream]:
        with self.lock:
            return [s for s in self.table.streams.values() if s.input == input_stream]

    def add_original(self, original: OriginalState) -> NetworkStream:
        """A stream registered here (by its publisher, or taken back after a restart): its
        state, and its entry in the stream table (called with the lock held)."""
        existing = self.table.get(original.name)
        if existing is not None and not existing.original:
            raise ValueError(f"{original.name!r} is a derived stream here: it cannot be registered")
        inp = InputStream(original.name, (original.root, original.item))
        stream = NetworkStream(id=original.name, input=inp, properties=raw_properties(inp), kind="items",
                               origin=self.id, parent=None, operators=(), route=(self.id,),
                               estimate=StreamEstimate(original.rate, 0.0), original=True)
        self.originals[original.name] = original
        self.table.add(stream)
        self.known_originals[original.name] = stream
        return stream

    def parent_original(self, stream: str) -> OriginalState | None:
        """The stream registered here that ``stream`` is made from directly (a copy of it, or
        operators on it), if it is one (called with the lock held)."""
        entry = self.table.get(stream)
        return self.originals.get(entry.parent) if entry is not None and entry.parent else None

    def stop_delivering(self, runtime: SubscriptionRuntime, streams) -> None:
        """``runtime`` takes nothing more from ``streams`` (called with the lock held)."""
        for stream in streams:
            # (a ``TrackSwitch``'s sides deliver to its runtime)
            self.deliveries[stream] = [(r, v) for r, v in self.deliveries.get(stream, ())
                                       if getattr(r, "runtime", r) is not runtime]

    def own_usage(self) -> PeerUsage:
        """This peer's load (cores) and the bandwidth it sends on each of its links (bit/s),
        counting what in-flight installations hold reserved: a planner that did not see those
        would pick the same peer again and again while its capacity is promised away."""
        with self.lock:
            return self.table.usage_at(self.id, self.transactions.reserved())

    def usage_report(self) -> dict:
        """What this peer tells the others of its usage (heartbeats, lookups, ``status``):
        ``own_usage`` (and the part of it in-flight installations hold), the bits/s it measured
        going out on each link, the cores its executor measurably spends, and its ``version``."""
        with self.lock:
            reserved = self.transactions.reserved()
            report = self.table.usage_at(self.id, reserved).to_json(self.id)
            if reserved:  # (what of it in-flight installations hold: ``control.in_flight``)
                report[IN_FLIGHT] = usage_at(self.id, reserved).to_json(self.id)
            report["version"] = self.version  # (a periodic re-optimisation round reads it: ``planned_over``)
            if self.measured_links:
                report["measured_links"] = {n: round(b, 1) for n, b in self.measured_links.items()}
            if self.measured_load is not None:
                report["measured_load"] = round(self.measured_load, 5)
            if self.pressured_links:
                report["pressured_links"] = list(self.pressured_links)
            if self.staying:
                report["staying"] = sorted(self.staying)
            if self.runs_joins:
                report["joins"] = True
        return report

    def staying_view(self) -> frozenset[str]:
        """The subscriptions, and super-peers, whose plans stay as they are: this peer's and
        what the others reported (``PlanningSnapshot.staying``)."""
        staying = set(self.staying)
        for report in list(self.peer_usage.values()):
            staying.update(report.get("staying", ()))
        return frozenset(staying)

    def usage_view(self, reports: dict[str, dict]) -> tuple[dict[frozenset[str], float], dict[str, float]]:
        """Used bandwidth per link and load per peer, from the ``reports`` (peer -> report) a
        planning view read: our own, and what the others reported.
        A link is as used as its plans reserve, or as its two ends measured it carrying if that
        is more (a stream faster than estimated, a replay, a burst): admission then refuses
        what would push a busy link into overload, with the link named. A peer likewise: its
        plans' load, or what its executor measurably spends if that is more."""
        link_used: dict[frozenset[str], float] = {}
        measured: dict[frozenset[str], float] = {}
        peer_used: dict[str, float] = {}
        for peer, report in reports.items():
            peer_used[peer] = max(report.get("load", 0.0), report.get("measured_load") or 0.0)
            for n, bits in report.get("links", {}).items():
                key = frozenset((peer, n))
                link_used[key] = link_used.get(key, 0.0) + bits
            for n, bits in report.get("measured_links", {}).items():
                key = frozenset((peer, n))
                measured[key] = measured.get(key, 0.0) + bits
        for key, bits in measured.items():
            link_used[key] = max(link_used.get(key, 0.0), bits)
        return link_used, peer_used

    def missing_streams(self, analysis: Analysis) -> list[str]:
        """Input streams of a subscription no super-peer has registered yet."""
        return sorted({i.input.stream for i in analysis.properties.inputs
                       if i.input.stream not in self.known_originals})

    def check_shapes(self, analysis: Analysis) -> None:
        """Refuse a subscription that reads a registered stream under another root or item
        name than the stream's: naming both shapes says what to fix (the query's path), where
        planning would only find no stream for the path it reads."""
        for i in analysis.properties.inputs:
            known = self.known_originals.get(i.input.stream)
            if known is not None and known.input != i.input:
                raise NodeError("FAILED_PRECONDITION", shape_mismatch(known, i.input.items))

    def unneeded_tail(self, s: NetworkStream) -> bool:
        """This peer ends the stream's route and nothing here takes the stream any more."""
        return (not s.original and len(s.route) > 1 and s.route[-1] == self.id and s.origin != self.id
                and not self.derived_here(s.id) and not self.deliveries.get(s.id)
                and s.id not in self.transactions.pinned())


def shape_mismatch(known: NetworkStream, items: tuple[str, ...]) -> str:
    """Why a path does not fit a registered stream: both shapes, and where it is registered."""
    name, (root, item) = known.input.stream, (_eqname(n) for n in known.input.items)
    return (f'stream "{name}" (registered at {known.origin}) has root <{root}> and items <{item}>, '
            f'but the query reads stream("{name}")/{"/".join(map(_eqname, items))}: write '
            f'stream("{name}")/{root}/{item}')


def _eqname(name: str) -> str:
    """An element name as a query writes it: ``{uri}local`` (lxml's) as ``Q{uri}local``."""
    return "Q" + name if name.startswith("{") else name
