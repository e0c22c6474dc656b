"""Sizes, bit rates and durations: one reading for every flag and file (issue 30).

Before, ``10MB`` was ten megabytes in ``--history`` and ten megabits per second in ``deploy
bandwidth``, and ``--max-item-bytes`` took only an integer. Here a value's unit alone says what
kind of quantity it is, the same in every flag and file:

* a **size** (bytes): ``B``, decimal ``kB MB GB TB`` (10^3 …), binary ``KiB MiB GiB TiB``
  (2^10 …), any case (``64mb`` is 64 MB: a size has no bits);
* a **bit rate** (bits per second): ``bit``, ``bit/s``, ``bps`` or ``b/s`` after a prefix
  ``k M G T`` (``Ki Mi …`` binary): ``10Mbit``, ``10mbit/s``, ``10 Mbps``, ``10Mb/s``; bytes per
  second only with a capital ``B`` and ``/s`` (``10MB/s`` is 80 Mbit/s), so that ``10mb/s`` keeps
  the meaning the rate flags gave it;
* a **duration** (seconds): terms ``ms s m h d w`` or their words, added up (``1h30m``,
  ``1 hour 30 minutes``, ``2 weeks``), or ISO 8601 (``PT10M``, ``P1DT2H``);
* an **item rate** (items per second): ``500/s``, ``500 items/s``;
* a bare number, which each flag documents (bytes, bit/s, seconds, milliseconds, items…).

A value of another kind than the flag's is refused, naming the unit expected and the kind it is
(``argument --max-item-bytes: expected a size in bytes such as 32MiB, 64MB or 1000000, got
'10Mbit' (that is a bit rate)``); it is never reinterpreted. A bare prefix (``10M``) has no kind
of its own: ``10m`` is ten minutes, and ``10k``/``10G`` are refused.

The parse functions are ``argparse`` ``type=`` functions too: ``UnitError`` is an
``ArgumentTypeError``, whose message argparse prints after the flag's name.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

Kind = Literal["size", "bitrate", "duration", "item_rate", "number"]

SIZE_UNITS: dict[str, int] = {
    "b": 1, "byte": 1, "bytes": 1, "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12,
    "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}
PREFIXES: dict[str, int] = {"": 1, "k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9, "t": 10 ** 12,
                            "ki": 2 ** 10, "mi": 2 ** 20, "gi": 2 ** 30, "ti": 2 ** 40}
DURATION_UNITS: dict[str, float] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
DURATION_WORDS: dict[str, str] = {
    "msec": "ms", "msecs": "ms", "millisecond": "ms", "milliseconds": "ms",
    "sec": "s", "secs": "s", "second": "s", "seconds": "s", "min": "m", "mins": "m", "minute": "m",
    "minutes": "m", "hr": "h", "hrs": "h", "hour": "h", "hours": "h", "day": "d", "days": "d",
    "week": "w", "weeks": "w"}
ITEM_RATE_UNITS = ("/s", "/sec", "item/s", "items/s")

_NUMBER = r"\d+(?:\.\d+)?"
# One term of a size, rate or item rate (an exponent is allowed there: ``100e6`` bit/s).
_SINGLE = re.compile(rf"\s*({_NUMBER}(?:[eE][+-]?\d+)?)\s*([A-Za-z/]*)\s*")
_PREFIXED = re.compile(r"([kmgt]i?)?(.*)", re.IGNORECASE)
BIT_WORDS = ("bit", "bits", "bit/s", "bits/s")  # any case
BIT_SYMBOLS = ("b/s", "bps")  # a lower-case b only: b is a bit, B a byte
BYTE_RATES = ("B/s", "byte/s", "bytes/s")
# One term of a duration: durations are scanned term after term (no exponent: ``1e3`` is not one).
_TERM = re.compile(rf"\s*({_NUMBER})\s*([a-z]*)\s*")
_ISO_PART = r"(?:(\d+(?:\.\d+)?){})?"
_ISO = re.compile("p" + _ISO_PART.format("w") + _ISO_PART.format("d") + "(?:t" + _ISO_PART.format("h")
                  + _ISO_PART.format("m") + _ISO_PART.format("s") + ")?")

WHAT = {"size": "a size in bytes", "bitrate": "a bit rate", "duration": "a duration",
        "item_rate": "a rate in items per second", "number": "a plain number"}
EXPECTED = {
    "size": "a size in bytes such as 32MiB, 64MB or 1000000",
    "bitrate": "a bit rate in bits per second such as 10Mbit, 10mbit/s or 100e6 (bytes per second: 10MB/s)",
    "duration": "a duration such as 90s, 10m, 1h30m, 2 weeks or PT10M",
    "milliseconds": "a duration such as 100ms, 1.5s or 100 (milliseconds)",
    "item_rate": "items per second such as 500 or 500/s",
}


class UnitError(argparse.ArgumentTypeError, ValueError):
    """A value that is not the quantity expected; the message says what was expected and what
    the value is instead (argparse prints it after the flag's name)."""


@dataclass(frozen=True)
class Quantity:
    """What a text denotes: its kind and its value in bytes, bit/s, seconds, items/s, or the
    bare number itself."""

    kind: Kind
    value: Decimal


def quantity(text: str) -> Quantity | None:
    """The quantity ``text`` denotes, of whatever kind its unit says; None if it is none."""
    single = _SINGLE.fullmatch(text)
    if single is not None:
        number, unit = Decimal(single.group(1)), single.group(2)
        found = _single_term(number, unit)
        if found is not None:
            return found
    seconds = _duration(text)
    return None if seconds is None else Quantity("duration", seconds)


def _single_term(number: Decimal, unit: str) -> Quantity | None:
    if not unit:
        return Quantity("number", number)
    if unit.lower() in SIZE_UNITS:
        return Quantity("size", number * SIZE_UNITS[unit.lower()])
    prefixed = _PREFIXED.fullmatch(unit)
    if prefixed is not None:
        factor, rest = PREFIXES[(prefixed.group(1) or "").lower()], prefixed.group(2)
        if rest.lower() in BIT_WORDS or rest in BIT_SYMBOLS:
            return Quantity("bitrate", number * factor)
        if rest in BYTE_RATES or rest.lower() in BYTE_RATES[1:]:
            return Quantity("bitrate", 8 * number * factor)
    if unit.lower() in ITEM_RATE_UNITS:
        return Quantity("item_rate", number)
    return None


def _duration(text: str) -> Decimal | None:
    """Seconds of a duration: ISO 8601, or terms added up (a bare number alone is seconds)."""
    text = text.strip().lower()
    iso = _ISO.fullmatch(text)
    if iso is not None and text not in ("p", "pt") and not text.endswith("t"):
        return sum((Decimal(v or 0) * Decimal(str(DURATION_UNITS[u])) for v, u in zip(iso.groups(), "wdhms")),
                   Decimal(0))
    terms, at = [], 0
    while at < len(text):  # (term after term, each at least one character: no backtracking)
        t = _TERM.match(text, at)
        if t is None:
            break
        terms.append((Decimal(t.group(1)), DURATION_WORDS.get(t.group(2), t.group(2))))
        at = t.end()
    units = [u for _, u in terms]
    if at < len(text) or not terms or any(u not in DURATION_UNITS for u in units if u) or ("" in units and len(units) > 1):
        return None
    return sum((value * Decimal(str(DURATION_UNITS[u or "s"])) for value, u in terms), Decimal(0))


_BARE_PREFIX = re.compile(rf"\s*{_NUMBER}\s*[kgt]i?\s*", re.IGNORECASE)


def _refuse(expected: str, text: str, found: Quantity | None, hint: str = "") -> UnitError:
    what = f"that is {WHAT[found.kind]}" if found is not None else "not a number with a unit"
    if found is None and _BARE_PREFIX.fullmatch(text):
        what = "a prefix without a unit: write e.g. 10kbit or 10kB"
    return UnitError(f"expected {EXPECTED[expected]}, got {text!r} ({what}{hint})")


def _of_kind(text: str, kind: Kind, expected: str | None = None) -> Decimal:
    """The value of ``text`` if it is of ``kind`` (a bare number as it is), else ``UnitError``."""
    if not isinstance(text, str):
        raise UnitError(f"expected {EXPECTED[expected or kind]}, got {text!r}")
    found = quantity(text)
    if found is None or found.kind not in (kind, "number"):
        hint = ""
        if kind == "bitrate" and found is not None and found.kind == "size":
            hint = ", not a rate"
        raise _refuse(expected or kind, text, found, hint)
    return found.value


def parse_size(text: str) -> int:
    """Bytes: ``32MiB``, ``64MB``, ``1GiB``, ``500kB``, ``1000000`` (a bare number is bytes)."""
    value = _of_kind(text, "size")
    if value != int(value):
        raise UnitError(f"expected a whole number of bytes, got {text!r} ({value} bytes)")
    return int(value)


def parse_bitrate(text: str) -> float:
    """Bits per second: ``10Mbit``, ``10mbit/s``, ``10 Mbps``, ``1.5Gbit``, ``100e6`` (a bare
    number is bit/s), ``10MB/s`` (bytes per second, × 8)."""
    return float(_of_kind(text, "bitrate"))


def parse_duration(text: str) -> float:
    """Seconds: ``90s``, ``10m``, ``1.5h``, ``2d``, ``1w``, ``500ms``, several added up
    (``1h30m``, ``1 hour 30 minutes``), ISO 8601 (``PT10M``), a bare number of seconds."""
    return float(_of_kind(_no_exponent(text, "duration"), "duration"))


def _no_exponent(text: str, expected: str) -> str:
    """A duration's numbers are plain (``1e3`` is not one: it reads as a typo of a unit)."""
    if isinstance(text, str) and re.search(r"\de", text, re.IGNORECASE) and not _ISO.fullmatch(text.strip().lower()):
        raise UnitError(f"expected {EXPECTED[expected]}, got {text!r} (a number with an exponent)")
    return text


def parse_milliseconds(text: str) -> int:
    """Whole milliseconds, for a flag counted in them (``--trigger-ms``): ``100`` (a bare number
    is milliseconds), ``100ms``, ``1.5s``."""
    found = quantity(_no_exponent(text, "milliseconds")) if isinstance(text, str) else None
    if found is not None and found.kind == "number":
        ms = found.value
    else:
        ms = _of_kind(text, "duration", "milliseconds") * 1000
    if ms != int(ms):
        raise UnitError(f"expected {EXPECTED['milliseconds']}, got {text!r} (not whole milliseconds)")
    return int(ms)


def parse_item_rate(text: str) -> float:
    """Items per second: ``500``, ``500/s``, ``500 items/s`` (a bare number is items per second)."""
    return float(_of_kind(text, "item_rate"))


def format_size(n: int) -> str:
    """Bytes as ``parse_size`` reads them back: the largest unit that divides them whole."""
    for unit, factor in sorted(_NAMED_SIZES.items(), key=lambda kv: -kv[1]):
        if n and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


_NAMED_SIZES = {"TiB": 2 ** 40, "TB": 10 ** 12, "GiB": 2 ** 30, "GB": 10 ** 9, "MiB": 2 ** 20, "MB": 10 ** 6,
                "KiB": 2 ** 10, "kB": 10 ** 3}


def format_bitrate(bits_per_s: float) -> str:
    """Bit/s as ``parse_bitrate`` reads them back (``100Mbit/s``; exact, else the number)."""
    for prefix, factor in (("G", 10 ** 9), ("M", 10 ** 6), ("k", 10 ** 3)):
        whole = bits_per_s / factor
        if bits_per_s >= factor and whole == int(whole) and int(whole) * factor == bits_per_s:
            return f"{int(whole)}{prefix}bit/s"
    return f"{Decimal(repr(float(bits_per_s))):f}bit/s"


def format_duration(seconds: float) -> str:
    """Seconds as ``parse_duration`` reads them back, in its largest whole units (``1h30m``,
    ``2w3d``, ``1m0.5s``)."""
    rest = Decimal(repr(float(seconds)))
    parts = []
    for unit in "wdhm":
        factor = Decimal(str(DURATION_UNITS[unit]))
        whole = int(rest // factor)
        if whole:
            parts.append(f"{whole}{unit}")
            rest -= whole * factor
    if rest or not parts:
        parts.append(f"{rest.normalize():f}s")
    return "".join(parts)
