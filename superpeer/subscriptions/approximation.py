"""Confidence intervals of a live approximate subscription (issue 15, OSCAR).

A subscription admitted on a 1/R sample (``subscribe --approximate`` under overload) receives
window records of the sample, with Σx² and the count of every summed element beside the
query's own aggregates (``sharing.estimates.with_variance_aggregates``). At its super-peer each
record is scaled to the whole stream's estimates before restructuring, and its intervals are
kept here, numbered by the result offset at which the record arrived: its result items come at
that offset or later (post-processing runs behind), so a read of results ``[o, o+n)`` carries
the intervals of the windows that arrived while those results were being made — each window's
exactly once over reads that follow one another, never after its results, and the same again
when the same range is read again. The read that ends the stream carries every interval left.

Where results survive a restart (``state_store``), so do the intervals: the super-peer started
again recomputes the windows from the stream's log, and those already estimated keep the offset
they arrived at (a reader who had them does not get them again).
"""

from __future__ import annotations

import bisect
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict

from lxml import etree

from sharing.estimates import Estimate, estimate_record, estimate_xml
from wxquery.operators.definitions import KeyValue, Partial
from wxquery.operators.records import WindowRecord
from wxquery.operators.windows import key_order

from ..errors import NodeError

log = logging.getLogger("streamglobe.superpeer")
NAMESPACE = "urn:streamglobe:approximation"
CONFIDENCE = 0.95
# windows whose intervals are held for readers; the oldest go first (as results past retention)
MAX_WINDOWS = 100_000
COARSEST = 64  # the coarsest sample admission and adaptation use (1/64: ``sharing.estimates.SAMPLE_RATES``)


def beyond_bound(approximate: bool, sampled: bool, min_rate: int) -> str:
    """What a refusal adds for an approximate subscription whose bound kept it off the samples
    that would have fitted ("" for none; ``sampled``: it can be answered on a sample at all)."""
    if not approximate or not sampled or min_rate >= COARSEST:
        return ""
    if min_rate == 1:
        return " (approximate, but its --min-rate 1 allows no sample)"
    return f" (approximate, not even on a 1/{min_rate} sample: the coarsest its --min-rate allows)"


def check_bounds(min_rate: int, weight: float) -> None:
    """An approximate subscription's bounds (``subscribe --min-rate 1/8 --weight 2``): a sample
    of 1/2 … 1/64 (1: never lowered) and a positive weight."""
    if min_rate not in (1, 2, 4, 8, 16, 32, COARSEST):
        raise NodeError("INVALID_ARGUMENT", f"min_rate: 1/{min_rate} is not one of 1, 1/2, 1/4, … 1/{COARSEST}")
    if not 0 < weight < float("inf"):
        raise NodeError("INVALID_ARGUMENT", f"weight: {weight} is not a positive number")


KEYED = "\x1f"  # (a window per key is stored as variable, KEYED, key: one row per window and key)


KEYS = "\x1e"  # (a window per several keys: variable, KEYS, the keys as a JSON list)


def stored(variable: str, key: KeyValue) -> str:
    """The variable a window's intervals are stored under: the stored rows are one per
    (variable, window), and a window per key has one per key (per combination of keys)."""
    if isinstance(key, tuple):
        return f"{variable}{KEYS}{json.dumps(list(key))}"
    return variable if key is None else f"{variable}{KEYED}{key}"


def unstored(stored_as: str) -> tuple[str, KeyValue]:
    variable, several, keys = stored_as.partition(KEYS)
    if several:
        return variable, tuple(json.loads(keys))
    variable, keyed, key = stored_as.partition(KEYED)
    return variable, key if keyed else None


class LiveEstimates:
    """The intervals of one approximate subscription's windows, by result offset."""

    def __init__(self, rate: int, asked: Mapping[str, tuple[Partial, ...]],
                 confidence: float = CONFIDENCE,
                 persist: Callable[[list[tuple[str, int, int, str]]], None] | None = None) -> None:
        """``asked``: per input variable, the partials of the query's own aggregates;
        ``persist``: where each window's intervals are written as they arrive (``restore``)."""
        self.rate = rate
        self.asked = dict(asked)
        self.confidence = confidence
        self._positions: list[int] = []  # ascending
        self._estimates: list[list[Estimate]] = []
        self._rates: list[int] = []  # each window's sample (the rate changes under pressure)
        # per variable, the last window estimated: a runtime planned again recomputes its inputs
        # from the start (its results are skipped), and so are the windows' intervals
        self._last: dict[str, tuple] = {}  # (window, key_order of its key)
        self.dropped = 0  # windows whose intervals were let go (``MAX_WINDOWS``)
        self.persist = persist
        self._lock = threading.Lock()

    def restore(self, rows: list[tuple[str, int, int, str]]) -> None:
        """The windows estimated before a restart (``persist``'s rows, in arrival order): kept at
        their offsets, and not estimated again when the recomputation reaches them."""
        with self._lock:
            for stored_as, window, position, estimates in rows[-MAX_WINDOWS:]:
                variable, key = unstored(stored_as)
                self._positions.append(max(position, self._positions[-1]) if self._positions else position)
                stored = json.loads(estimates)
                if isinstance(stored, dict):  # ({rate, estimates}: the rate may change)
                    self._rates.append(int(stored["rate"]))
                    stored = stored["estimates"]
                else:
                    self._rates.append(self.rate)
                self._estimates.append([Estimate(**{**e, "key": tuple(e["key"])}) if isinstance(e.get("key"), list)
                                        else Estimate(**e) for e in stored])  # (JSON keeps several keys as a list)
                at = (window, key_order(key))
                self._last[variable] = max(at, self._last.get(variable, at))

    def scale(self, variable: str, values: list, position: int) -> list:
        """The values with every window record replaced by its scaled copy (the stream's
        estimates, without Σx²); the records' intervals kept at result offset ``position``."""
        out: list = []
        found: list[tuple[int, KeyValue, list[Estimate]]] = []
        if self.rate == 1:  # (on the whole stream again: its windows are exact)
            return values
        for value in values:
            if isinstance(value, WindowRecord):
                copy = WindowRecord(value.index, dict(value.values), value.key)  # the original may be shared
                estimates = estimate_record(copy, self.rate, self.confidence, self.asked.get(variable, ()))
                at = (value.index, key_order(value.key))  # (time windows come by window, then key)
                last = self._last.get(variable)
                if last is None or at > last:
                    self._last[variable] = at
                    found.append((value.index, value.key, estimates))
                value = copy
            out.append(value)
        if not found:
            return out
        with self._lock:
            at = max(position, self._positions[-1]) if self._positions else position
            if self.persist is not None:  # stored before any reader can be handed them
                try:
                    self.persist([(stored(variable, key), window, at, json.dumps(
                        {"rate": self.rate, "estimates": [asdict(e) for e in estimates]}))
                                  for window, key, estimates in found])
                except Exception:  # noqa: BLE001 - the data path goes on; a restart may repeat these
                    log.exception("could not store the intervals of windows %s", [w for w, _, _ in found])
            for _, _, estimates in found:
                self._positions.append(at)
                self._estimates.append(estimates)
                self._rates.append(self.rate)
            excess = len(self._positions) - MAX_WINDOWS
            if excess > 0:
                del self._positions[:excess]
                del self._estimates[:excess]
                del self._rates[:excess]
                self.dropped += excess
        return out

    def between(self, offset: int, count: int, last: bool) -> list[Estimate]:
        """The intervals of the windows that arrived at result offsets ``[offset, offset+count)``
        (``last``: the read ends the stream — from ``offset`` on)."""
        return [e for _, group in self._between(offset, count, last) for e in group]

    def _between(self, offset: int, count: int, last: bool) -> list[tuple[int, list[Estimate]]]:
        with self._lock:
            lo = bisect.bisect_left(self._positions, offset)
            hi = len(self._positions) if last else bisect.bisect_left(self._positions, offset + count)
            return list(zip(self._rates[lo:hi], self._estimates[lo:hi]))

    def xml(self, offset: int, count: int, last: bool) -> str:
        """``between`` as the ``<sg:approximation>`` element of archive answers ("" if none).
        Once the network has changed the subscription's sample (``control.adaptive_sampling``),
        every window says its own (``sample="1/R"`` on ``<sg:window>``): a reader joining the
        elements of several reads keeps each window's rate whatever element it came in."""
        runs: list[tuple[int, list[Estimate]]] = []
        for rate, group in self._between(offset, count, last):
            if runs and runs[-1][0] == rate:
                runs[-1][1].extend(group)
            else:
                runs.append((rate, list(group)))
        if not runs:
            return ""
        with self._lock:
            changed = len(set(self._rates)) > 1
        if not changed:
            return estimate_xml(runs[0][1], runs[0][0], self.confidence, None, NAMESPACE)
        root = None
        for rate, group in runs:
            part = etree.fromstring(estimate_xml(group, rate, self.confidence, None, NAMESPACE))
            for window in part:
                window.set("sample", f"1/{rate}")
            if root is None:
                root = part
            else:
                root.extend(list(part))
        return etree.tostring(root, encoding="unicode")

    def status(self) -> dict:
        with self._lock:
            last = self._estimates[-1] if self._estimates else []
            return {"rate": self.rate, "confidence": self.confidence, "windows": len(self._positions),
                    "rates": sorted(set(self._rates)),
                    "windows_let_go": self.dropped,
                    "last_window": [{"window": e.window, "function": e.function, "element": e.element,
                                     "estimate": e.estimate, "low": e.low, "high": e.high} for e in last]}
