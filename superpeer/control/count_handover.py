"""Count windows moved between plans, aligned (DESIGN.md §3 and §12; issue 31).

A count window counts the items that reach its operator from the moment it starts, so a
subscription whose count windows are aggregated in the network keeps its windows only if the
new plan's operator counts as the old one does. The move installs the new count window
**held** (``wxquery.operators.count_alignment``): it keeps its input and emits nothing. The
subscription's peer then asks the old operator's peer where it stands (``CountAnchor``: the
first item from origin o on is its item number n) and hands that to the new operator's peer
(``AlignCount``), which numbers its held items from there on. Its first window is the first
that starts at or after the anchor; the ``TrackSwitch`` takes the windows before that from the
old plan and the rest from the new one, by window index.

An anchor from before the new operator's first item cannot place it ("later"): the old operator
is asked again until it has passed that item. One from after the items the new operator has seen
so far is taken, and the new operator keeps holding until its input reaches it. A peer that does
not answer, or an old operator that cannot say where it stands, is asked again until the switch's
deadline cancels the move; a refusal of the anchor fails the switch at once. Either way the old
plan goes on alone.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from sharing.stream_table import NetworkStream
from wxquery.operators import definitions as alg
from wxquery.operators.count_alignment import Anchor, NotYet, Unalignable

from ..executors import Executor
from ..peer_state import PeerState
from .peer_link import Aligned, PeerLink

ASK_EVERY_S = 0.2  # how often a pending handover asks again


def count_window_of(streams: Mapping[str, NetworkStream], stream: str) -> NetworkStream | None:
    """The stream whose operators count the windows that ``stream`` carries: it, or the stream
    it is copied, coarsened or filtered from (records from records keep the count's numbering)."""
    seen = set()
    entry = streams.get(stream)
    while entry is not None and entry.id not in seen:
        seen.add(entry.id)
        if any(isinstance(op, alg.WindowAggregate) and op.window.kind == "count" for op in entry.operators):
            return entry
        if entry.kind != "records" or entry.parent is None:
            return None
        if not all(isinstance(op, (alg.CombineWindows, alg.AggregateFilter)) for op in entry.operators):
            return None
        entry = streams.get(entry.parent)
    return None


# ---------------------------------------------------------------------- the operators' peers

def anchor_here(state: PeerState, executor: Executor, stream: str) -> tuple[Anchor | None, str]:
    """Where the count window computing ``stream`` here stands ((None, why) if not known)."""
    if not executor.aligns_count_windows:
        return None, f"the {executor.name} executor at {state.id} does not say where its count windows stand"
    with state.lock:
        try:
            anchor = executor.count_anchor(stream)  # type: ignore[attr-defined]
        except KeyError:
            anchor = None
        if anchor is None:
            return None, (f"{stream} is not computed at {state.id}" if stream not in state.table else
                          f"the count window of {stream} at {state.id} has not counted items that say "
                          "where they came from")
        return anchor, ""


def align_here(state: PeerState, executor: Executor, stream: str, anchor: Anchor) -> Aligned:
    """The held count window computing ``stream`` here, aligned at ``anchor``."""
    if not executor.aligns_count_windows:
        return Aligned(False, reason=f"the {executor.name} executor at {state.id} cannot align count windows")
    with state.lock:  # (its outputs are delivered as a push's are: with the lock held)
        try:
            executor.align_count(stream, anchor)  # type: ignore[attr-defined]
        except NotYet as exc:
            return Aligned(False, later=True, reason=str(exc))
        except (Unalignable, KeyError, AssertionError) as exc:
            why = str(exc) if isinstance(exc, Unalignable) else f"no held count window computes {stream} at {state.id}"
            return Aligned(False, reason=why)
    return Aligned(True)


# ---------------------------------------------------------------------- the subscription's peer

@dataclass
class CountHandover:
    """One move's count window: the old operator's peer and stream, the new one's."""

    old_peer: str
    old_stream: str
    new_peer: str
    new_stream: str
    aligned: bool = False
    failed: str = ""
    waiting: str = ""  # why the last attempt has to be repeated
    asked_at: float = 0.0

    def step(self, link: PeerLink) -> None:
        """One attempt (at most every ``ASK_EVERY_S``), without any lock held: RPCs."""
        if self.aligned or self.failed or time.monotonic() - self.asked_at < ASK_EVERY_S:
            return
        self.asked_at = time.monotonic()
        try:
            self._ask(link)
        except Exception as exc:  # noqa: BLE001 - the switch is cancelled; the other switches go on
            self.failed = f"aligning the count window failed: {exc}"

    def _ask(self, link: PeerLink) -> None:
        anchor, why = link.count_anchor(self.old_peer, self.old_stream)
        if anchor is None:
            self.waiting = why
            return
        got = link.align_count(self.new_peer, self.new_stream, anchor)
        if got is None:
            self.waiting = f"{self.new_peer} did not answer"
        elif got.aligned:
            self.aligned, self.waiting = True, ""
        elif got.later:
            self.waiting = got.reason
        else:
            self.failed = f"the new count window could not be aligned: {got.reason}"


def handover_for(streams: Mapping[str, NetworkStream], old_stream: str, new_stream: str,
                 new: Mapping[str, NetworkStream]) -> CountHandover | str:
    """The handover a move of a count window needs, or why it cannot be moved: the new plan
    must count in an operator of its own (``new``: its new streams), which is then aligned."""
    old = count_window_of(streams, old_stream)
    made = count_window_of({**streams, **new}, new_stream)
    if any(isinstance(op, alg.WindowAggregate) and op.window.key is not None
           for entry in (old, made) if entry is not None for op in entry.operators):
        return "its count windows are counted per key, and only a count over all items can be aligned"
    if old is None or made is None:
        return "its count windows are not computed by one count operator on each plan"
    if made.id not in new:
        return f"the new plan would reuse the count windows of {made.id}, which count from elsewhere"
    return CountHandover(old.origin, old.id, made.origin, made.id)
