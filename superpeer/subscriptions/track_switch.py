"""One input of a subscription moving from an old plan's stream to a new plan's, with no item
missing and none twice (DESIGN.md §12; GenMig's parallel track, Krämer's thesis §9).

Both plans run side by side for a while, each delivering to its own side of the switch. Every
item says which item of the original stream it came from (its origin, ``data.origins``); the
switch happens at an item ``at`` of the original:

* the old side feeds the subscription every item, until ``at`` is known; from then on only
  those from before ``at``;
* ``at`` is the origin of the first item the new plan delivers (or just past the last one the
  old side fed, if that is later): the new plan delivers every item of the subscription from
  where its streams were attached on, so nothing before its first item is missing from it;
* the new side's items from ``at`` on wait until the old side is *complete* below ``at`` — it
  delivered an item from ``at`` on (items come in order), it ended, or this peer saw the
  original pass ``at`` on the way to the old plan's operators here (``progress``) — and then go
  on directly.

A subscription whose time windows are aggregated in the network receives window records, not
items: the same switch then runs on window indexes (window k covers ``[k·μ, k·μ+Δ)`` of the
reference, aligned at 0 whichever plan computes it): the old plan delivers the windows before
window ``at``, the new plan those from it on. The new plan's first windows may have begun before
its streams were attached (partial), so ``at`` is at least ``partial_windows`` (⌈Δ/μ⌉) after the
first window it delivers. Count windows aggregated in the network switch by window index too;
the new plan's count window is aligned with the old one's and delivers only whole windows
(``by_window``, ``control.count_handover``), so ``at`` is simply its first.

Items are fed to one ``SubscriptionRuntime`` throughout, so whatever its post-processing holds
goes on unchanged. Every call is made with the peer's lock held (the data plane's), so the two
sides never interleave. An item without an origin cannot be placed: the switch is then given up
(``failed``), the old side feeds everything, and the new plan is removed again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..data.origins import FedHigh
from ..peer_state import PeerState
from .runtime import SubscriptionRuntime


@dataclass
class TrackSwitch:
    runtime: SubscriptionRuntime
    variable: str
    old_stream: str
    new_stream: str
    at: int | None = None  # the original's item the new plan takes over from
    old_high: int = -1  # the latest origin the old side fed
    complete: bool = False  # the old side has fed everything from before ``at``
    ended: bool = False  # the input's end was fed
    failed: str = ""
    partial_windows: int = 0  # > 0: the input is time-window records, switched by window index
    by_window: bool = False  # the input is count-window records, switched by window index
    held: list = field(default_factory=list)  # the new side's items waiting for the old side
    held_origins: list = field(default_factory=list)  # … and their origins
    held_end: bool = False
    switched_items: int = 0  # fed from the new side
    before_new: int = 0  # what the old side fed before the new plan's first item
    old_from: int = 0  # the old plan's stream took over from an earlier one here: what it sends from before is not fed
    sample: int | None = None  # the new plan reads another sample: its windows are scaled so from the switch on

    def __post_init__(self) -> None:
        self.old = _Side(self, old=True)
        self.new = _Side(self, old=False)

    @property
    def done(self) -> bool:
        """The old plan delivers nothing more: it can be removed."""
        return self.complete or self.ended or bool(self.failed)

    # ------------------------------------------------------------------ the two sides

    def keys(self, values: list, origins: Sequence[int] | None) -> Sequence[int] | None:
        """Where each item stands in the original: its origin, or its window's index."""
        if (self.partial_windows or self.by_window) and values:
            return [v.index for v in values]
        return origins

    def from_old(self, values: list, end: bool, origins: Sequence[int] | None) -> None:
        origins = self.keys(values, origins)
        if self.ended or (self.complete and not self.failed):
            return
        if self.old_from > 0 and origins is not None and len(origins) and origins[0] < self.old_from:
            kept = [(v, o) for v, o in zip(values, origins) if o >= self.old_from]
            values, origins = [v for v, _ in kept], [o for _, o in kept]
        if self.failed or self.at is None:
            if values and origins is None and not self.failed:
                self.fail("the old plan's items do not say where they came from")
            if origins is not None and len(origins):
                self.old_high = max(self.old_high, origins[-1])
            self.before_new += len(values)
            self._feed(values, end, origins)
            return
        if origins is None:
            self.fail("the old plan's items do not say where they came from")
            self._feed(values, end, None)
            return
        kept = [(v, o) for v, o in zip(values, origins) if o < self.at]
        if kept:
            self.old_high = max(self.old_high, kept[-1][1])
        self._feed([v for v, _ in kept], False, [o for _, o in kept])
        if end or len(kept) < len(values):
            self._complete()

    def from_new(self, values: list, end: bool, origins: Sequence[int] | None) -> None:
        origins = self.keys(values, origins)
        if self.failed or self.ended:
            return
        if self.complete:  # switched: the new plan is the only one
            if origins is not None:
                kept = [(v, o) for v, o in zip(values, origins) if o >= self.at]
                values, origins = [v for v, _ in kept], [o for _, o in kept]
            self.switched_items += len(values)
            self._feed(values, end, origins)
            return
        if values and origins is None:
            self.fail("the new plan's items do not say where they came from")
            return
        if self.at is None:
            if not values:
                return  # (an end before any item: the original ended, the old side ends too)
            # (windows: also past the old plan's latest — a late item may have opened the new
            # plan's first window, long before the new operator's clock stood at attach)
            self.at = max(origins[0], self.old_high + 1) + self.partial_windows
        if values:
            kept = [(v, o) for v, o in zip(values, origins) if o >= self.at]
            values = [v for v, _ in kept]
            self.held_origins.extend(o for _, o in kept)
        self.held.extend(values)
        self.held_end = self.held_end or end

    def progress(self, next_origin: int) -> None:
        """This peer has taken every item of the original below ``next_origin`` through the old
        plan's operators here: the old side is complete below ``at`` once that passes it."""
        if (self.at is not None and not self.done and not self.partial_windows and not self.by_window
                and next_origin >= self.at):
            self._complete()

    def fed_before(self, fed: FedHigh | None) -> None:
        """What the old plan's stream delivered here before the switch was put in front of it
        (``origins.fed_high``): the new plan's first item may be older than that — it reuses a stream
        that reaches this peer later than the old plan's — and must not be taken again."""
        if fed is not None:
            origin, index = fed
            self.old_high = max(self.old_high, index if self.partial_windows or self.by_window else origin)

    def took_over_at(self, at: int) -> None:
        """The old plan's stream took over from an earlier plan's at item (or window) ``at`` (an
        earlier switch, done): what it sends from before ``at`` — it reached this peer behind the
        earlier one — came from that plan, and is dropped as the earlier switch dropped it."""
        self.old_from = max(self.old_from, at)
        self.old_high = max(self.old_high, at - 1)

    def fail(self, why: str) -> None:
        self.failed = why
        self.held, self.held_origins, self.held_end = [], [], False

    # ------------------------------------------------------------------

    def _complete(self) -> None:
        self.complete = True
        if self.sample is not None:
            self.runtime.set_sample(self.sample)  # (before the new plan's first item)
        held, origins, end = self.held, self.held_origins, self.held_end
        self.held, self.held_origins, self.held_end = [], [], False
        self.switched_items += len(held)
        self._feed(held, end, origins)

    def _feed(self, values: list, end: bool, origins: Sequence[int] | None) -> None:
        """``origins``: the items' (the runtime notes how far its input came: ``resume_at``);
        a window's index is not one."""
        if values or end:
            windows = self.partial_windows or self.by_window
            self.runtime.feed(self.variable, values, end, None if windows else origins)
        self.ended = self.ended or end


class _Side:
    """What the data plane delivers one plan's stream to (``PeerState.deliveries``)."""

    def __init__(self, switch: TrackSwitch, old: bool) -> None:
        self.switch = switch
        self.old = old

    @property
    def runtime(self) -> SubscriptionRuntime:
        return self.switch.runtime

    def feed(self, variable: str, values: list, end: bool, origins: Sequence[int] | None = None) -> None:
        if self.old:
            self.switch.from_old(values, end, origins)
        else:
            self.switch.from_new(values, end, origins)


def progress_stream(state: PeerState, stream: str) -> str | None:
    """A stream here numbered by the original's items from which every operator down to
    ``stream`` runs on this peer: how far it has come is how far the old plan has (None if
    some operator runs elsewhere)."""
    seen = set()
    while stream and stream not in seen:
        seen.add(stream)
        entry = state.table.get(stream)
        if entry is None:
            return None
        if entry.original:
            return stream
        if entry.operators and entry.origin != state.id:
            return None
        parent = entry.parent
        if not entry.operators and parent is not None and parent not in state.table:
            known = state.known_originals.get(parent)
            return stream if known is not None else None
        if parent is None:
            return None
        if not entry.operators and state.table.get(parent) is not None and state.table.get(parent).original:
            return stream
        stream = parent
    return None
