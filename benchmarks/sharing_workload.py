"""The workload of ``sharing_over_time``: nested per-item selections over photons, and a seeded
timeline of what happens to the network (subscribe, unsubscribe, a crash and restart, a link cut
and restored).

The selections come in families: a WIDE one and NARROW ones whose ranges lie inside it, so that
a narrow one could be computed from the wide one's stream instead of from the original at the
source. Every one returns whole photons (``return $p``): a projection would stop the narrow
ones from reading the wide ones' streams, and what is measured here is sharing, not projection.
Registered widest first, the planner can share; in a shuffled order, a narrow one registered
before its wide one gets a stream of its own from the source, and only re-planning it later can
share it — which is what the benchmark measures.

Everything here is pure (no network): the timeline is made before any phase runs, so every
phase of a run replays exactly the same events.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from photons.generator import Photon

SOURCE_PEER = "SP0"  # a corner of grid-4x4: the longest routes cross the whole grid
STREAM = "photons"
# a photon's elements the selections range over, and the generator's field for each
FIELDS = {"coord/cel/ra": "ra", "coord/cel/dec": "dec", "en": "en"}


@dataclass(frozen=True)
class Selection:
    """One subscription of the pool: ``ranges`` are (element, low, high), None: open."""

    name: str
    peer: str
    ranges: tuple[tuple[str, float | None, float | None], ...]

    def text(self) -> str:
        conds = []
        for path, low, high in self.ranges:
            if low is not None:
                conds.append(f"$p/{path} >= {low}")
            if high is not None:
                conds.append(f"$p/{path} <= {high}")
        return (f'<sel>{{ for $p in stream("{STREAM}")/photons/photon\n'
                f"  where {' and '.join(conds)}\n  return $p }}</sel>")

    def selects(self, photon: Photon) -> bool:
        for path, low, high in self.ranges:
            value = getattr(photon, FIELDS[path])
            if (low is not None and value < low) or (high is not None and value > high):
                return False
        return True


RA, DEC, EN = "coord/cel/ra", "coord/cel/dec", "en"
# Families: the first of each is WIDE, the rest NARROW inside it (and sometimes inside another
# family's wide one too). Subscribers sit far from the source, where sharing saves most.
POOL: tuple[Selection, ...] = (
    Selection("A-wide", "SP15", ((RA, 120.0, 138.0),)),
    Selection("A-mid", "SP14", ((RA, 125.0, 136.0), (DEC, -49.0, -43.0))),
    Selection("A-narrow", "SP11", ((RA, 128.0, 135.0), (DEC, -48.0, -44.0))),
    Selection("A-hard", "SP10", ((RA, 125.0, 136.0), (EN, 0.3, None))),
    Selection("B-wide", "SP12", ((EN, 0.2, None),)),
    Selection("B-mid", "SP13", ((EN, 0.4, None),)),
    Selection("B-narrow", "SP8", ((EN, 0.7, None), (RA, 125.0, 136.0))),
    Selection("C-wide", "SP3", ((DEC, -49.0, -43.0),)),
    Selection("C-mid", "SP7", ((DEC, -48.0, -44.0), (EN, 0.3, None))),
    Selection("C-narrow", "SP6", ((DEC, -48.0, -44.0), (RA, 128.0, 135.0))),
    Selection("D-wide", "SP9", ((RA, 120.0, 138.0), (EN, 0.2, None))),
    Selection("D-narrow", "SP5", ((RA, 131.0, 135.0), (EN, 0.4, None))),
)
BY_NAME = {s.name: s for s in POOL}


@dataclass(frozen=True)
class Event:
    """What happens at the start of a window: ``kind`` is start (the first registrations),
    subscribe, unsubscribe, kill, restart, cut or restore; ``names``: the selections registered
    or removed, in this order; ``peers``: the peer killed or restarted, or a link's two ends."""

    kind: str
    names: tuple[str, ...] = ()
    peers: tuple[str, ...] = ()

    def label(self) -> str:
        if self.kind in ("start", "subscribe", "unsubscribe"):
            return f"{self.kind} {','.join(self.names)}"
        return f"{self.kind} {'–'.join(self.peers)}"


@dataclass
class Timeline:
    """The events, one per window, and after each: the live selections and what is down."""

    events: list[Event] = field(default_factory=list)
    live: list[tuple[str, ...]] = field(default_factory=list)  # after each event, in registration order
    down_peers: list[tuple[str, ...]] = field(default_factory=list)
    cut_links: list[tuple[tuple[str, str], ...]] = field(default_factory=list)

    def to_json(self) -> list[dict]:
        return [{"event": e.label(), "live": list(live), "down_peers": list(down), "cut_links": [list(c) for c in cut]}
                for e, live, down, cut in zip(self.events, self.live, self.down_peers, self.cut_links)]


def widest_first(names: list[str] | tuple[str, ...], width: Callable[[str], float]) -> list[str]:
    """The best registration order for sharing: a wider selection first, so a narrower one
    registered after it can read its stream (ties by name: deterministic)."""
    return sorted(names, key=lambda n: (-width(n), n))


# A chooser of the peer to crash and of the link to cut, given the live selections (the
# benchmark asks the in-process model which ones carry the most shared traffic).
Busiest = Callable[[tuple[str, ...]], tuple[str, tuple[str, str]]]


def make_timeline(seed: int, busiest: Busiest, initial: int = 8) -> Timeline:
    """The same seed, the same timeline: ``initial`` selections of the pool registered in a
    shuffled order, then two subscribed, one unsubscribed, the busiest intermediate peer
    killed and restarted, the busiest link cut and restored, two subscribed and two
    unsubscribed (the ones removed drawn among the live ones)."""
    rng = random.Random(seed)
    names = [s.name for s in POOL]
    rng.shuffle(names)
    live, waiting = names[:initial], names[initial:]
    timeline = Timeline()

    def add(event: Event, down: tuple[str, ...] = (), cut: tuple[tuple[str, str], ...] = ()) -> None:
        timeline.events.append(event)
        timeline.live.append(tuple(live))
        timeline.down_peers.append(down)
        timeline.cut_links.append(cut)

    def subscribe(n: int) -> None:
        chosen = [waiting.pop(rng.randrange(len(waiting))) for _ in range(min(n, len(waiting)))]
        live.extend(chosen)
        add(Event("subscribe", tuple(chosen)))

    def unsubscribe(n: int) -> None:
        chosen = [live.pop(rng.randrange(len(live))) for _ in range(min(n, len(live) - 1))]
        waiting.extend(chosen)
        add(Event("unsubscribe", tuple(chosen)))

    add(Event("start", tuple(live)))
    subscribe(2)
    unsubscribe(1)
    peer, link = busiest(tuple(live))
    add(Event("kill", peers=(peer,)), down=(peer,))
    add(Event("restart", peers=(peer,)))
    peer, link = busiest(tuple(live))
    add(Event("cut", peers=link), cut=(link,))
    add(Event("restore", peers=link))
    subscribe(2)
    unsubscribe(2)
    return timeline
