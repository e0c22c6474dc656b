"""Which super-peers and links are down, from heartbeats.

Every ``interval_s`` a super-peer asks every other one how it is (``Heartbeat``). A peer that
misses ``misses`` answers in a row is declared **down** (with the time and the last error), and
**up** again at its first answer. Only one end of a link is seen from here, so a neighbour that
does not answer means the link is down; whether the neighbour itself is down is decided with
the others' help: every answer names the peers its sender currently hears, and a peer that
someone hears is up — it is only the link to it (a cut) that is down. The others' reports are
a round old, so the verdict (cut or down) can change once, a round after the declaration.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeartbeatSettings:
    interval_s: float = 1.0
    misses: int = 3  # missed answers in a row before a peer is declared down

    def __post_init__(self) -> None:
        if not self.interval_s > 0:
            raise ValueError(f"the heartbeat interval must be positive, not {self.interval_s}")
        if self.misses < 1:
            raise ValueError(f"a peer is declared down after at least 1 missed heartbeat, not {self.misses}")


@dataclass
class PeerHealth:
    up: bool | None = None  # None: not decided yet (no answer, fewer misses than the limit)
    since: float | None = None  # when the current state was declared
    misses: int = 0
    last_heard: float | None = None
    reason: str = ""  # the last error
    hears: frozenset[str] = frozenset()  # the peers this one reported hearing
    downs: int = 0  # how often it was declared down
    incarnation: str = ""  # the process answering: a new one means it restarted (state lost)
    restarts: int = 0


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class FailureDetector:
    me: str
    neighbours: frozenset[str]
    settings: HeartbeatSettings = field(default_factory=HeartbeatSettings)
    peers: dict[str, PeerHealth] = field(default_factory=dict)

    def heard(self, peer: str, now: float, hears: frozenset[str] = frozenset(),
              incarnation: str = "") -> None:
        h = self.peers.setdefault(peer, PeerHealth())
        if incarnation and incarnation != h.incarnation:
            if h.incarnation:
                h.restarts += 1
                log.warning("%s: %s has restarted", self.me, peer)
            h.incarnation = incarnation
        if h.up is not True:
            if h.up is False:
                log.warning("%s: %s answers again (down for %.1f s)", self.me, peer, now - (h.since or now))
            h.up, h.since = True, now
        h.misses, h.last_heard, h.hears = 0, now, hears

    def missed(self, peer: str, now: float, reason: str) -> None:
        h = self.peers.setdefault(peer, PeerHealth())
        h.misses += 1
        h.reason = reason
        if h.misses >= self.settings.misses and h.up is not False:
            h.up, h.since, h.downs = False, now, h.downs + 1
            log.warning("%s: %s declared down after %d missed heartbeats: %s", self.me, peer, h.misses, reason)

    def hearing(self) -> list[str]:
        """The peers that answered this one's latest heartbeat (sent with every answer; a peer
        it has begun to miss is left out at once, not only once declared down)."""
        return sorted(p for p, h in list(self.peers.items()) if h.up and h.misses == 0)

    def incarnation(self, peer: str) -> str:
        """The process last heard at ``peer`` ("" if none yet)."""
        h = self.peers.get(peer)
        return "" if h is None else h.incarnation

    def is_down(self, peer: str) -> bool:
        h = self.peers.get(peer)
        return h is not None and h.up is False

    def heard_by_others(self, peer: str) -> list[str]:
        return sorted(p for p, h in list(self.peers.items()) if h.up and peer in h.hears)

    def peer_state(self, peer: str) -> str:
        """``up``, ``down``, ``unreachable`` (others hear it: the way here is cut) or ``unknown``."""
        h = self.peers.get(peer)
        if h is None or h.up is None:
            return "unknown"
        if h.up:
            return "up"
        return "unreachable" if self.heard_by_others(peer) else "down"

    def link_down(self, neighbour: str) -> bool:
        return neighbour in self.neighbours and self.is_down(neighbour)

    def status(self, now: float) -> dict:
        peers = {}
        for p, h in sorted(list(self.peers.items())):  # a snapshot: the heartbeat thread adds peers
            shown = {"state": self.peer_state(p), "since": _iso(h.since),
                     "last_heard_s_ago": None if h.last_heard is None else round(now - h.last_heard, 1),
                     "times_down": h.downs, "restarts": h.restarts}
            if h.up is False:
                others = self.heard_by_others(p)
                shown["reason"] = (f"no answer to {h.misses} heartbeats ({h.reason})" +
                                   (f"; heard by {', '.join(others)}" if others else ""))
            peers[p] = shown
        links = {}
        for n in sorted(self.neighbours):
            h = self.peers.get(n)
            if h is None or h.up is None:
                links[f"{self.me}–{n}"] = {"state": "unknown"}
            elif h.up:
                links[f"{self.me}–{n}"] = {"state": "up", "since": _iso(h.since)}
            else:
                cause = "the link is cut" if self.heard_by_others(n) else f"{n} is down"
                links[f"{self.me}–{n}"] = {"state": "down", "since": _iso(h.since),
                                           "reason": f"{n} does not answer ({cause}): {h.reason}"}
        return {"interval_s": self.settings.interval_s, "misses": self.settings.misses,
                "peers": peers, "links": links}
