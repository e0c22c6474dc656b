"""What a topology file may say, checked strictly (issue 30): a misspelt key (``load_capcity =
8.0``) once loaded silently with the default. Unknown keys, wrong types and values out of range
(a capacity or bandwidth not above zero, a link naming an unknown super-peer, a duplicate id or
link, a bad address) are ``TopologyError``s naming the file, the line, the key and the keys
known there.

``tomllib`` gives no line numbers, so ``Lines`` finds them in the text: the n-th ``[[superpeer]]``
or ``[[link]]`` table, and the key's line inside it (its header's when the key is absent or the
table is written inline). Bandwidths take the units every flag does (``streamglobe.units``): a
bare number is bit/s, as before, or ``"100Mbit"``, ``"10MB/s"``.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharing.backbone import TopologyError
from streamglobe.units import UnitError, parse_bitrate

PEER_PORT_OFFSET = 1000
SUPERPEER_KEYS = ("id", "address", "peer_address", "load_capacity", "pindex", "position", "settings")
LINK_KEYS = ("a", "b", "bandwidth")
SUBNET_KEYS = ("id", "peers", "gateways")
TABLES = {"superpeer": SUPERPEER_KEYS, "link": LINK_KEYS, "subnet": SUBNET_KEYS}
_HEADER = re.compile(r"\s*\[\[\s*([A-Za-z0-9_-]+)\s*\]\]\s*(?:#.*)?")
_KEY = re.compile(r"\s*([A-Za-z0-9_-]+|\"[^\"]*\")\s*=")


class Lines:
    """Where each ``[[table]]`` and key is in a topology file's text."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers: dict[str, list[int]] = {}  # table -> line number (1-based) of each header
        for number, line in enumerate(self.lines, 1):
            header = _HEADER.fullmatch(line)
            if header is not None:
                self.headers.setdefault(header.group(1), []).append(number)

    def of(self, table: str | None, index: int = 0, key: str | None = None) -> int | None:
        """The line of ``key`` in the ``index``-th ``[[table]]`` (None: a top-level key), else
        of the table's header; None where neither is found."""
        starts = sorted(n for found in self.headers.values() for n in found)
        if table is None:
            first, last = 1, (starts[0] - 1 if starts else len(self.lines))
        else:
            tables = self.headers.get(table, [])
            if index >= len(tables):
                return self._anywhere(table)
            first = tables[index]
            last = next((n - 1 for n in starts if n > first), len(self.lines))
        if key is not None:
            for number in range(first, last + 1):
                found = _KEY.match(self.lines[number - 1])
                if found is not None and found.group(1).strip('"') == key:
                    return number
        return first if table is not None else self._anywhere(key)

    def _anywhere(self, name: str | None) -> int | None:
        for number, line in enumerate(self.lines, 1):
            found = _KEY.match(line)
            if name is not None and found is not None and found.group(1).strip('"') == name:
                return number
        return None


@dataclass
class Checked:
    """A topology file's content once checked: what ``Backbone.from_mapping`` reads (bandwidths
    in bit/s) and the addresses and positions of each super-peer."""

    mapping: dict[str, list[dict[str, Any]]]
    addresses: dict[str, str]
    peer_addresses: dict[str, str]
    positions: dict[str, tuple[float, float]]
    # its own ``superpeer serve`` settings (``[superpeer.settings]``), checked by serve itself
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    subnets: list[dict[str, Any]] = field(default_factory=list)  # ``[[subnet]]``s (``sharing.subnets``)


class Checker:
    def __init__(self, path: Path, text: str) -> None:
        self.path, self.lines = path, Lines(text)

    def error(self, message: str, table: str | None = None, index: int = 0, key: str | None = None) -> TopologyError:
        line = self.lines.of(table, index, key)
        return TopologyError(f"{self.path}:{line}: {message}" if line else f"{self.path}: {message}")

    def check(self, data: dict[str, Any]) -> Checked:
        for key in data:
            if key not in TABLES:
                raise self.error(f"unknown key {key!r}{_hint(key, TABLES)} (known keys: {', '.join(TABLES)})",
                                 key=key)
        tables = {name: self._tables(data, name) for name in TABLES}
        if not tables["superpeer"]:
            raise self.error("the topology has no [[superpeer]]")
        checked = Checked({"superpeer": [], "link": []}, {}, {}, {})
        for index, entry in enumerate(tables["superpeer"]):
            self._superpeer(index, entry, checked)
        seen: dict[frozenset[str], int] = {}
        for index, entry in enumerate(tables["link"]):
            link = self._link(index, entry, checked)
            pair = frozenset((link["a"], link["b"]))
            if pair in seen:
                raise self.error(f"[[link]] {link['a']}–{link['b']} is defined twice (also link {seen[pair] + 1})",
                                 "link", index)
            seen[pair] = index
            checked.mapping["link"].append(link)
        for index, entry in enumerate(tables["subnet"]):
            checked.subnets.append(self._subnet(index, entry, checked))
        return checked

    def _subnet(self, index: int, entry: dict[str, Any], checked: Checked) -> dict[str, Any]:
        """A ``[[subnet]]``: its id, its super-peers and (optional) gateways, each a known
        super-peer; how subnets fit the backbone is checked with it (``sharing.subnets``)."""
        named = entry.get("id")
        what = f"[[subnet]] {named if isinstance(named, str) and named else index + 1}"
        self._known_keys("subnet", index, entry, what)
        out: dict[str, Any] = {"id": self._string("subnet", index, entry, "id", what)}
        for key in ("peers", "gateways"):
            if key not in entry:
                if key == "peers":
                    raise self.error(f"{what}: missing key 'peers' (its super-peers' ids)", "subnet", index)
                continue
            value = entry[key]
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value) or not value:
                raise self.error(f"{what}: {key} must be a list of super-peer ids, not {value!r}",
                                 "subnet", index, key)
            unknown = [p for p in value if p not in checked.addresses]
            if unknown:
                raise self.error(f"{what}: {key} names no super-peer of the topology: {unknown[0]!r}",
                                 "subnet", index, key)
            out[key] = list(value)
        return out

    def _tables(self, data: dict[str, Any], name: str) -> list[dict[str, Any]]:
        tables = data.get(name, [])
        if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
            raise self.error(f"{name} must be tables written [[{name}]], not {type(tables).__name__}", key=name)
        return tables

    def _known_keys(self, table: str, index: int, entry: dict[str, Any], what: str) -> None:
        for key in entry:
            if key not in TABLES[table]:
                raise self.error(f"{what}: unknown key {key!r}{_hint(key, TABLES[table])} "
                                 f"(known keys: {', '.join(TABLES[table])})", table, index, key)

    def _string(self, table: str, index: int, entry: dict[str, Any], key: str, what: str) -> str:
        if key not in entry:
            raise self.error(f"{what}: missing key {key!r}", table, index)
        value = entry[key]
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"{what}: {key} must be a string, not {value!r}", table, index, key)
        return value

    def _positive(self, index: int, entry: dict[str, Any], key: str, what: str) -> float:
        value = entry.get(key, 1.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"{what}: {key} must be a number, not {value!r}", "superpeer", index, key)
        if not (value > 0 and math.isfinite(value)):
            raise self.error(f"{what}: {key} must be above zero, not {value!r}", "superpeer", index, key)
        return float(value)

    def _superpeer(self, index: int, entry: dict[str, Any], checked: Checked) -> None:
        named = entry.get("id")
        what = f"[[superpeer]] {named if isinstance(named, str) and named else index + 1}"
        self._known_keys("superpeer", index, entry, what)
        peer = self._string("superpeer", index, entry, "id", what)
        what = f"[[superpeer]] {peer}"
        if peer in checked.addresses:
            raise self.error(f"{what}: the id {peer!r} is defined twice", "superpeer", index, "id")
        capacity = self._positive(index, entry, "load_capacity", what)
        pindex = self._positive(index, entry, "pindex", what)
        for key in ("address", "peer_address"):
            if key == "peer_address" and key not in entry:
                continue
            address = entry.get(key, "")
            host, _, port = address.rpartition(":") if isinstance(address, str) else ("", "", "")
            top = 65536 - (PEER_PORT_OFFSET if key == "address" and "peer_address" not in entry else 0)
            if not host or not port.isdigit() or not 0 < int(port) < top:
                raise self.error(f"{what}: {key} must be \"host:port\" (a port below {top}), not {address!r}",
                                 "superpeer", index, key)
            (checked.addresses if key == "address" else checked.peer_addresses)[peer] = address
        if "position" in entry:
            xy = entry["position"]
            if not (isinstance(xy, list) and len(xy) == 2
                    and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in xy)):
                raise self.error(f"{what}: position must be [x, y] (two numbers), not {xy!r}",
                                 "superpeer", index, "position")
            checked.positions[peer] = (float(xy[0]), float(xy[1]))
        if "settings" in entry:
            if not isinstance(entry["settings"], dict):
                raise self.error(f"{what}: settings must be a table of serve's settings "
                                 f"([superpeer.settings] or settings = {{ … }}), not {entry['settings']!r}",
                                 "superpeer", index, "settings")
            checked.settings[peer] = dict(entry["settings"])
        checked.mapping["superpeer"].append({"id": peer, "address": checked.addresses[peer],
                                             "load_capacity": capacity, "pindex": pindex})

    def _link(self, index: int, entry: dict[str, Any], checked: Checked) -> dict[str, Any]:
        ends = [entry.get(key) for key in ("a", "b")]
        what = f"[[link]] {ends[0]}–{ends[1]}" if all(isinstance(e, str) for e in ends) else f"[[link]] {index + 1}"
        self._known_keys("link", index, entry, what)
        ends = [self._string("link", index, entry, key, what) for key in ("a", "b")]
        what = f"[[link]] {ends[0]}–{ends[1]}"
        for key, end in zip("ab", ends):
            if end not in checked.addresses:
                raise self.error(f"{what}: {key} names no super-peer of the topology: {end!r} "
                                 f"(there are {', '.join(checked.addresses)})", "link", index, key)
        if ends[0] == ends[1]:
            raise self.error(f"{what} connects a super-peer to itself", "link", index, "b")
        if "bandwidth" not in entry:
            raise self.error(f"{what}: missing key 'bandwidth' (bit/s, e.g. 100e6 or \"100Mbit\")", "link", index)
        value = entry["bandwidth"]
        try:
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise UnitError(f"a bandwidth is a number of bit/s or a string such as \"100Mbit\", not {value!r}")
            bandwidth = parse_bitrate(value) if isinstance(value, str) else float(value)
        except UnitError as exc:
            raise self.error(f"{what}: bandwidth: {exc}", "link", index, "bandwidth") from None
        if not (bandwidth > 0 and math.isfinite(bandwidth)):
            raise self.error(f"{what}: bandwidth must be above zero, not {value!r}", "link", index, "bandwidth")
        return {"a": ends[0], "b": ends[1], "bandwidth": bandwidth}


def _hint(key: str, known) -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_topology(path: Path, text: str, data: dict[str, Any]) -> Checked:
    """``data`` (``text`` as TOML) checked strictly; ``TopologyError`` at the first fault."""
    return Checker(path, text).check(data)
