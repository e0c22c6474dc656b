"""A subscription moving live to a new plan (``reoptimisation``): what the re-optimiser keeps
while the switch is pending, so that it can finish the move or undo it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..subscriptions.record import SubscriptionRecord
from ..subscriptions.track_switch import TrackSwitch
from .count_handover import CountHandover


@dataclass
class Move:
    """A subscription moving to a new plan: its switch, and what to remove or restore after."""

    switch: TrackSwitch
    record: SubscriptionRecord
    entry: dict  # its plan history entry (how the switch went)
    ids: list[str]  # the old plan's ids: removed once the switch is done
    peers: set[str]  # … at these peers
    paths: tuple  # the old plan's paths (a break there cancels the switch)
    restore: dict  # the record's fields before the move (a cancel puts them back)
    new_id: str
    new_peers: set[str]  # where the new plan is (a cancel removes it there)
    progress: str | None  # a stream here showing how far the old plan has come (``progress_stream``)
    handover: CountHandover | None = None  # a count window to align (``count_handover``)
    since: float = field(default_factory=time.monotonic)
