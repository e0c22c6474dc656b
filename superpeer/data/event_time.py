"""Event time of a stream registered here, and the watermarks that advance it while it is idle.

A time window ``|det_time diff 20 step 10|`` closes when an item with a larger ``det_time`` arrives
(DESIGN.md §3) — so the last window of a stream that goes quiet would wait for the next item. A
publisher that names its stream's event-time element (``register_stream(event_time="det_time",
event_time_rate=1.0)``: units of it per second of wall time) lets its super-peer stand in for
that item: after ``idle_s`` without items, event time is taken to have advanced at the given rate
from the highest value seen, and a **watermark** carrying it travels the stream's routes like an
item (``DataPlane.watermark``). A window operator reading the same element treats it as an item
with that value: windows ending at or before it minus the lateness close; an item arriving later
below it minus the lateness is late (dropped and counted, as any late item).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from wxquery.operators.items import path_strings

# child elements, perhaps ending in an attribute (``det_time``, ``coord/cel/ra``, ``@t``, ``pos/@t``)
PATH = re.compile(r"(?:[A-Za-z_][\w.\-]*/)*@?[A-Za-z_][\w.\-]*\Z")


def check_event_time(path: str, rate: float) -> str:
    """Why an event-time declaration cannot be used ("" if it can)."""
    if not PATH.match(path):
        return (f"event time {path!r} is not a path of child elements of the item, perhaps ending "
                "in an attribute (e.g. det_time, coord/cel/ra or @t)")
    if not (rate > 0 and math.isfinite(rate)):
        return f"the event-time rate must be a positive number of units per second, not {rate}"
    return ""


@dataclass
class EventTime:
    path: str
    rate: float = 1.0  # units of ``path`` per second of wall time
    high: float = -math.inf  # the highest value published
    last_arrival: float | None = None  # monotonic time of the last item
    sent: float = -math.inf  # the last watermark sent

    def observe(self, values: list, now: float) -> None:
        """Items just published (parsed): their event times."""
        for el in values:
            texts = path_strings(el, self.path)
            text = texts[0] if texts else None
            try:
                t = float(text) if text is not None else math.nan
            except ValueError:
                continue
            if math.isfinite(t) and t > self.high:
                self.high = t
        if values:
            self.last_arrival = now

    def idle_watermark(self, now: float, idle_s: float) -> float | None:
        """The watermark to send now, if the stream has been idle ``idle_s`` and event time has
        moved past the last one sent."""
        if self.last_arrival is None or not math.isfinite(self.high) or now - self.last_arrival < idle_s:
            return None
        w = self.high + self.rate * (now - self.last_arrival)
        if w <= self.sent:
            return None
        self.sent = w
        return w

    def status(self) -> dict:
        return {"path": self.path, "units_per_s": self.rate,
                "highest": self.high if math.isfinite(self.high) else None,
                "last_watermark": self.sent if math.isfinite(self.sent) else None}
