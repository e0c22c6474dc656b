"""What a publisher's registration of a stream must say, checked before anything is recorded:
a name the network can tell from a derived stream's id (``SP1.12``), its root and item
elements, and an event time windows can read."""

from __future__ import annotations

import re

from ..data.event_time import check_event_time
from ..errors import NodeError

STREAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,127}")  # never a derived stream's id (SP1.12)


def check_registration(name: str, root: str, item: str, event_time: str, event_time_rate: float) -> None:
    """Raise INVALID_ARGUMENT with the reason for what cannot be registered."""
    if not name or not root or not item:
        raise NodeError("INVALID_ARGUMENT", "a stream needs a name, a root element and an item element")
    if not STREAM_NAME.fullmatch(name):
        raise NodeError("INVALID_ARGUMENT", f"stream name {name!r}: use letters, digits, '_' and '-' "
                                            "(at most 128, starting with a letter or '_')")
    why = check_event_time(event_time, event_time_rate) if event_time else ""
    if why:
        raise NodeError("INVALID_ARGUMENT", why)
