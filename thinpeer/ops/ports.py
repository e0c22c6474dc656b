"""Free loopback ports, and topology files moved onto them: what lets a test, a benchmark or the
demo start a network beside whatever else listens on this host."""

from __future__ import annotations

import random
import re
import socket
import tomllib
from importlib.resources.abc import Traversable
from pathlib import Path


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports free now, drawn below the kernel's ephemeral range: a port of
    that range may go to any process's ``bind(0)`` or outgoing connection between this call and
    the daemon's bind (eight Spark JVMs starting at once take dozens), which once made a
    super-peer of a test's network fail to start (CI, issue 17's stop)."""
    low = _ephemeral_low()
    candidates = random.sample(range(10000, low), min(low - 10000, 64 * n)) if low > 10000 + 64 * n else []
    socks: list[socket.socket] = []
    try:
        for port in [*candidates, *[0] * n]:  # 0: the kernel's choice, if too few were free
            if len(socks) == n:
                break
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux; 32768, its default, elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def with_free_ports(source: str | Path | Traversable, dest: str | Path) -> Path:
    """A copy of a topology file whose super-peers listen on free loopback ports.

    ``source`` may be a shipped topology (``thinpeer.ops.topologies.shipped_topology``), which is
    package data rather than necessarily a file on disk.
    """
    text = (Path(source) if isinstance(source, str) else source).read_text(encoding="utf-8")
    peers = tomllib.loads(text)["superpeer"]
    ports = free_ports(2 * len(peers))
    new = {peer["address"]: (port, peer_port) for peer, port, peer_port in zip(peers, ports[::2], ports[1::2])}

    # One pass over the address lines: substituting peer by peer would rewrite a line a former
    # substitution wrote when a free port equals another peer's listed one (a duplicate key).
    def moved(match: re.Match) -> str:
        indent, key, value = match.groups()
        if key == "peer_address":
            return ""
        port, peer_port = new[value]
        return f'{indent}address = "127.0.0.1:{port}"\n{indent}peer_address = "127.0.0.1:{peer_port}"\n'

    text = re.sub(r'^([ \t]*)(address|peer_address)\s*=\s*"([^"]*)"[ \t]*(?:#.*)?\n?', moved, text, flags=re.M)
    Path(dest).write_text(text)
    return Path(dest)
