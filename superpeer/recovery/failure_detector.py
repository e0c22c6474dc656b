"""Which super-peers and links are down, from heartbeats and the records gossip brings.

Every ``interval_s`` a super-peer asks each of its backbone **neighbours** how it is
(``Heartbeat``): their links carry its items, so it watches them itself. A neighbour that misses
``misses`` answers in a row is declared **down** (with the time and the last error), and **up**
again at its first answer. Only one end of a link is seen from here, so a neighbour that does
not answer means the link is down; whether the neighbour itself is down is decided with the
others' help: a peer that another neighbour of it hears (its record says so), or that answers an
indirect probe through other peers (``relayed``), is up — it is only the link to it (a cut) that
is down. Peers further away are judged from the records of their own neighbours
(``membership.Membership.verdict``): this peer learns their state without asking them.

A super-peer that is itself slow — its rounds start late or take longer than they may, as on
an overloaded machine — misses answers that were sent. It then asks for more misses in a row
before declaring a neighbour down (``LocalHealth``: Lifeguard's local health multiplier), so
that one slow process does not declare its healthy neighbours dead.
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
class LocalHealth:
    """How slow this super-peer itself is lately: up one for each heartbeat round that started
    late or took too long (its own scheduling, not the peers'), down one for each on time, at
    most ``most``. A neighbour is declared down after ``misses + score`` silences in a row."""

    score: int = 0
    most: int = 4
    slow_rounds: int = 0

    def observe(self, late_s: float, took_s: float, interval_s: float) -> bool:
        """A round that began ``late_s`` after its time and whose questions took ``took_s``
        (a round waits at most one interval for answers): whether it was slow."""
        slow = late_s > interval_s / 2 or took_s > 1.5 * interval_s
        self.score = min(self.most, self.score + 1) if slow else max(0, self.score - 1)
        self.slow_rounds += slow
        return slow


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
    relayed: bool = False  # down from here, but another peer reached it since (indirect probe)


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class FailureDetector:
    me: str
    neighbours: frozenset[str]
    settings: HeartbeatSettings = field(default_factory=HeartbeatSettings)
    peers: dict[str, PeerHealth] = field(default_factory=dict)
    health: LocalHealth = field(default_factory=LocalHealth)

    def heard(self, peer: str, now: float, hears: frozenset[str] | None = None,
              incarnation: str = "") -> None:
        """An answer from ``peer`` (``hears``: the neighbours it reports hearing, if it told)."""
        h = self.peers.setdefault(peer, PeerHealth())
        self._incarnation(peer, h, incarnation)
        if h.up is not True:
            if h.up is False:
                log.warning("%s: %s answers again (down for %.1f s)", self.me, peer, now - (h.since or now))
            h.up, h.since = True, now
        h.misses, h.last_heard, h.relayed = 0, now, False
        if hears is not None:
            h.hears = hears

    def _incarnation(self, peer: str, h: PeerHealth, incarnation: str) -> None:
        if incarnation and incarnation != h.incarnation:
            if h.incarnation:
                h.restarts += 1
                log.warning("%s: %s has restarted", self.me, peer)
                if h.up is False and peer in self.neighbours:  # (a new process: judged afresh,
                    h.up, h.misses, h.relayed = None, 0, False  # not declared down unasked)
            h.incarnation = incarnation

    def reported(self, peer: str, hears: frozenset[str], incarnation: str) -> None:
        """What ``peer``'s newest record says of it: its process, the neighbours it hears."""
        h = self.peers.setdefault(peer, PeerHealth())
        self._incarnation(peer, h, incarnation)
        h.hears = hears

    def judged(self, peer: str, up: bool | None, now: float, reason: str = "") -> None:
        """The verdict of the records on a peer this one does not watch (not a neighbour)."""
        if peer in self.neighbours or up is None:
            return
        h = self.peers.setdefault(peer, PeerHealth())
        if up and h.up is not True:
            if h.up is False:
                log.warning("%s: %s is up again (down for %.1f s)", self.me, peer, now - (h.since or now))
            h.up, h.since, h.misses = True, now, 0
        elif not up and h.up is not False:
            h.up, h.since, h.downs, h.reason = False, now, h.downs + 1, reason
            log.warning("%s: %s is down: %s", self.me, peer, reason)

    def relay_result(self, peer: str, reached: bool) -> None:
        """An indirect probe of a silent neighbour: whether another peer reached it."""
        h = self.peers.get(peer)
        if h is not None and h.up is False:
            h.relayed = reached

    def declared(self) -> dict[str, str]:
        """The neighbours this peer declares down (neighbour -> the process it last heard
        there): silent here and, as far as it knows, to everyone else."""
        return {n: self.peers[n].incarnation for n in sorted(self.neighbours)
                if n in self.peers and self.peer_state(n) == "down"}

    def missed(self, peer: str, now: float, reason: str) -> None:
        h = self.peers.setdefault(peer, PeerHealth())
        h.misses += 1
        h.reason = reason
        if h.misses >= self.settings.misses + self.health.score and h.up is not False:
            h.up, h.since, h.downs = False, now, h.downs + 1
            log.warning("%s: %s declared down after %d missed heartbeats: %s", self.me, peer, h.misses, reason)

    def hearing(self) -> list[str]:
        """The neighbours that answered this one's latest heartbeat (in its record and every
        answer; one it has begun to miss is left out at once, not only once declared down)."""
        return sorted(p for p, h in list(self.peers.items())
                      if p in self.neighbours and h.up and h.misses == 0 and h.last_heard is not None)

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
        if peer not in self.neighbours:
            return "down"  # (the verdict of the records: no one hears it)
        return "unreachable" if h.relayed or self.heard_by_others(peer) else "down"

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
                shown["reason"] = (h.reason if p not in self.neighbours else
                                   f"no answer to {h.misses} heartbeats ({h.reason})" +
                                   (f"; heard by {', '.join(others)}" if others else "") +
                                   ("; reached through other super-peers" if h.relayed else ""))
            peers[p] = shown
        links = {}
        for n in sorted(self.neighbours):
            h = self.peers.get(n)
            if h is None or h.up is None:
                links[f"{self.me}–{n}"] = {"state": "unknown"}
            elif h.up:
                links[f"{self.me}–{n}"] = {"state": "up", "since": _iso(h.since)}
            else:
                cause = "the link is cut" if self.peer_state(n) == "unreachable" else f"{n} is down"
                links[f"{self.me}–{n}"] = {"state": "down", "since": _iso(h.since),
                                           "reason": f"{n} does not answer ({cause}): {h.reason}"}
        return {"interval_s": self.settings.interval_s, "misses": self.settings.misses,
                "local_health": {"score": self.health.score, "slow_rounds": self.health.slow_rounds,
                                 "misses_to_declare": self.settings.misses + self.health.score},
                "peers": peers, "links": links}
