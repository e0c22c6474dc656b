"""What the super-peers know of each other, spread by gossip (SWIM-style) rather than by every
peer asking every other each second.

Every super-peer authors one **record** of itself: its process (``epoch``, ``started``), a
version that grows with each change, the neighbours it hears and those it declared down, and
what the others read of it — its usage report, the originals registered at it, its
subscriptions' pins. Nobody else writes a peer's record, so two records of one peer are ordered
by their ``stamp`` alone (a later process first, then the higher version), and merging keeps the
newer: no conflict, no vote.

Records travel on the heartbeats: each round a peer asks its backbone neighbours (it watches
their links: items cross them) and one other peer taken in turn from a shuffled list (SWIM's
probe target, so that news crosses the network in O(log N) rounds rather than its diameter).
Each heartbeat carries the sender's **digest** (peer -> stamp of the record it holds) and the
answer the records the digest lacks: push-pull anti-entropy, with nothing to send while nothing
changes. Two peers whose digests agreed at their last exchange send each other only its hash:
a message does not grow with the network while nothing changes. A change that failure
handling waits for (the process, whom it hears, whom it declared down, its originals) is
pushed at once to a few peers, and a peer that learns it from a push passes it on once
(infection-style): it crosses the network in O(log N) hops.

A peer's state as seen from afar is the **verdict** of its records: down when a peer that
watches it declared it down (no answer directly, nor through others: ``FailureDetector``) and
no one hears it; up when its record is known and no one declared it down; unknown before.

A declaration names the process and its **alive** count as the declarer knew them (SWIM's
incarnation number). A peer that reads that it was declared down while it runs *refutes* it: it
counts ``alive`` up in a new record, pushed at once, and a declaration of an older count no
longer counts anywhere. A peer slow to answer (an overloaded machine) is so not taken for dead
by peers that never watch it; a crashed one cannot refute, and stays down.

Pure: no sockets and no threads of its own (one lock, because the heartbeat round and the
answers to other peers' heartbeats merge at the same time).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

Stamp = tuple[float, str, int]  # (process start, epoch, version)
Declared = tuple[str, int]  # (the process declared down, its alive count as the declarer knew it)

MAX_RECORDS = 64  # records in one message at most (the rest go with the next ones)
SAME = "="  # a digest sent as its hash: "=" and the hash (``Membership.digest_hash``)


@dataclass(frozen=True)
class Record:
    peer: str
    epoch: str  # the process: new at every start
    started: float  # when that process started (orders two epochs of a peer)
    version: int  # grows with every change the process makes to its record
    made_at: float  # when this version was made (the author's clock)
    hears: frozenset[str] = frozenset()  # neighbours answering its heartbeats
    down: Mapping[str, Declared] = field(default_factory=dict)  # neighbour declared down
    usage: Mapping = field(default_factory=dict)  # ``PeerState.usage_report``
    originals: tuple[Mapping, ...] = ()  # streams registered there (``stream_to_json``)
    pins: Mapping[str, int] = field(default_factory=dict)  # ``HistoryPins.own``
    waiting: tuple[str, ...] = ()  # streams its waiting subscriptions wait for (told when registered)
    alive: int = 0  # declarations of this process it refuted (SWIM's incarnation number)

    @property
    def stamp(self) -> Stamp:
        return (self.started, self.epoch, self.version)

    def urgent_change(self, older: "Record | None") -> bool:
        """Whether what changed since ``older`` is pushed at once: what failure handling waits
        for — a restart, a neighbour no longer heard, a declaration made or withdrawn — and a
        subscription beginning to wait for a stream. The rest follows by anti-entropy: usage,
        pins, originals (a stream's waiters are told directly), a peer's first record and the
        neighbours it begins to hear (else a network starting up would push every record to
        every peer, several times over)."""
        return older is not None and (self.epoch != older.epoch or bool(older.hears - self.hears)
                                      or dict(self.down) != dict(older.down) or self.alive != older.alive
                                      or bool(set(self.waiting) - set(older.waiting)))

    def declares(self, peer: str, epoch: str, alive: int) -> bool:
        """Whether this record declares ``peer``'s process ``epoch`` down at its count ``alive``
        or later (a declaration of an earlier count was refuted since)."""
        declared = self.down.get(peer)
        return declared is not None and declared[0] in ("", epoch) and declared[1] >= alive

    def concerns(self, older: "Record | None") -> set[str]:
        """The peers whose verdict this record (replacing ``older``) may change."""
        was = older or self
        return {self.peer, *self.hears, *self.down, *was.hears, *was.down}

    def to_json(self) -> dict:
        return {"peer": self.peer, "epoch": self.epoch, "started": self.started, "version": self.version,
                "made_at": self.made_at, "hears": sorted(self.hears),
                # (the epoch alone under "down", as peers of before refutation read it)
                "down": {p: d[0] for p, d in self.down.items()},
                "down_alive": {p: d[1] for p, d in self.down.items()}, "alive": self.alive,
                "usage": self.usage, "originals": list(self.originals), "pins": dict(self.pins),
                "waiting": list(self.waiting)}

    @staticmethod
    def from_json(j: Mapping) -> "Record":
        return Record(str(j["peer"]), str(j["epoch"]), float(j["started"]), int(j["version"]),
                      float(j.get("made_at", 0.0)), frozenset(map(str, j.get("hears", ()))),
                      _declarations(j), dict(j.get("usage", {})),
                      tuple(j.get("originals", ())), {str(k): int(v) for k, v in dict(j.get("pins", {})).items()},
                      tuple(map(str, j.get("waiting", ()))), int(j.get("alive", 0)))


def _declarations(j: Mapping) -> dict[str, Declared]:
    """A record's declarations as sent: the epochs under "down", their alive counts under
    "down_alive" (none from a peer of before refutation: 0)."""
    alive = dict(j.get("down_alive", {}))
    return {str(k): (str(v), int(alive.get(k, 0))) for k, v in dict(j.get("down", {})).items()}


FIGURES = 2  # significant figures of a measured rate in a record (rounded up)


def settled_usage(usage: Mapping) -> dict:
    """A usage report as a record carries it: the measured rates rounded up to ``FIGURES``
    significant figures. They move a little every round on a busy peer; at full precision every record
    would change every round, and every digest with it (anti-entropy then sends whole digests,
    O(N), all the time). A planner that needs a peer's exact usage asks the peer (its lookup
    answers with its report as it is)."""
    out = dict(usage)
    if isinstance(out.get("measured_load"), (int, float)):
        out["measured_load"] = _figures(out["measured_load"])
    if isinstance(out.get("measured_links"), Mapping):
        out["measured_links"] = {n: _figures(b) for n, b in out["measured_links"].items()}
    return out


def _figures(x: float) -> float:
    """``x`` rounded up to ``FIGURES`` significant figures (a rate read from a record is never
    below the one measured: admission holds a link to it)."""
    if not x > 0 or not math.isfinite(x):
        return x
    step = 10 ** (math.floor(math.log10(x)) - FIGURES + 1)
    return float(f"{math.ceil(x / step - 1e-9) * step:.{FIGURES + 1}g}")


def records_to_json(records: Iterable[Record]) -> str:
    return json.dumps([r.to_json() for r in records])


def records_from_json(text: str) -> list[Record]:
    """The records of a message ("" or malformed entries: none — a bad record from one peer
    must not stop the others' from being taken)."""
    out = []
    for j in json.loads(text or "[]"):
        try:
            out.append(Record.from_json(j))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def digest_from_json(text: str) -> dict[str, Stamp]:
    return {str(p): (float(s[0]), str(s[1]), int(s[2])) for p, s in json.loads(text or "{}").items()}


@dataclass(frozen=True)
class Verdict:
    up: bool | None  # None: nothing known of it yet
    reason: str = ""


class Membership:
    """The records this peer holds: its own, authored here, and the newest of every other."""

    def __init__(self, me: str, epoch: str, started: float, rng: random.Random | None = None) -> None:
        self.me, self.epoch, self.started = me, epoch, started
        self.alive = 0  # declarations of this process refuted so far (``refute``)
        self.records: dict[str, Record] = {}
        self._lock = threading.Lock()
        self._rng = rng or random.Random()
        self._turn: list[str] = []  # gossip partners still to ask, in a shuffled order
        self._digest: tuple[str, str] | None = None  # (digest as sent, its hash): None once changed

    # ------------------------------------------------------------------ this peer's record

    def author(self, now: float, hears: Iterable[str], down: Mapping[str, Declared], usage: Mapping,
               originals: Sequence[Mapping], pins: Mapping[str, int],
               waiting: Iterable[str] = ()) -> tuple[Record, bool]:
        """This peer's record as it is now: a new version when anything in it changed.
        ``down``: the neighbours it declares down (-> the process last heard there and its
        alive count, ``alive_of``). Returns the record, and whether the change is urgent
        (``Record.urgent_change``)."""
        with self._lock:
            old = self.records.get(self.me)
            content = (frozenset(hears), dict(down), dict(usage), tuple(originals), dict(pins),
                       tuple(sorted(set(waiting))), self.alive)
            if old is not None and content == (old.hears, dict(old.down), dict(old.usage), old.originals,
                                               dict(old.pins), old.waiting, old.alive):
                return old, False
            new = Record(self.me, self.epoch, self.started, 0 if old is None else old.version + 1, now,
                         *content)
            self.records[self.me] = new
            self._digest = None
            return new, new.urgent_change(old)

    def own(self) -> Record | None:
        return self.records.get(self.me)

    def alive_of(self, peer: str, epoch: str) -> int:
        """The alive count of ``peer``'s process ``epoch`` in the newest record held of it."""
        with self._lock:
            r = self.records.get(peer)
            return r.alive if r is not None and r.epoch == epoch else 0

    def refutes_mine(self, record: Record, older: Record | None) -> bool:
        """Whether ``record`` refutes this peer's declaration of its author: its process, at
        a higher alive count than declared (or than ``older``'s, not declared yet)."""
        own = self.records.get(self.me)
        declared = own.down.get(record.peer) if own is not None else None
        rose = record.alive > (older.alive if older is not None and older.epoch == record.epoch else 0)
        if declared is not None:  # (a rise past the count declared: not each later version of it)
            return rose and declared[0] in ("", record.epoch) and record.alive > declared[1]
        return rose

    def refute(self, records: Iterable[Record]) -> bool:
        """Whether any of ``records`` declares this process down at its present alive count:
        then the count goes up (the caller authors and pushes the new record at once)."""
        with self._lock:
            if any(r.declares(self.me, self.epoch, self.alive) for r in records):
                self.alive += 1
                return True
            return False

    # ------------------------------------------------------------------ exchanging

    def digest(self) -> dict[str, Stamp]:
        with self._lock:
            return {p: r.stamp for p, r in self.records.items()}

    def digest_and_hash(self) -> tuple[str, str]:
        """The digest as sent, and its hash (two peers with equal hashes hold the same
        records), of one moment; made again only after the records changed."""
        with self._lock:
            if self._digest is None:
                text = json.dumps({p: self.records[p].stamp for p in sorted(self.records)})
                self._digest = (text, hashlib.blake2b(text.encode(), digest_size=12).hexdigest())
            return self._digest

    def digest_json(self) -> str:
        return self.digest_and_hash()[0]

    def digest_hash(self) -> str:
        return self.digest_and_hash()[1]

    def missing_for(self, digest_text: str) -> list[Record]:
        """What a heartbeat's digest lacks: ``missing``, or nothing when it came as a hash equal
        to this peer's (a hash that differs gets nothing now: the asker sends its digest next)."""
        if digest_text.startswith(SAME):
            return []
        return self.missing(digest_from_json(digest_text))

    def missing(self, digest: Mapping[str, Stamp]) -> list[Record]:
        """The records newer than ``digest`` says the asker holds (at most ``MAX_RECORDS``: the
        asker's next digest asks for the rest), its own left out."""
        with self._lock:
            newer = [r for p, r in self.records.items() if p not in digest or r.stamp > tuple(digest[p])]
        if len(newer) > MAX_RECORDS:
            newer = self._rng.sample(newer, MAX_RECORDS)
        return newer

    def merge(self, records: Iterable[Record]) -> list[tuple[Record, Record | None]]:
        """Take the records newer than those held; returns each one taken, with the one it
        replaced. A record of this peer is never taken from others (only a process of it
        authors it; an older process's record is stale)."""
        news = []
        with self._lock:
            for r in records:
                if r.peer == self.me:
                    continue
                old = self.records.get(r.peer)
                if old is None or r.stamp > old.stamp:
                    self.records[r.peer] = r
                    self._digest = None
                    news.append((r, old))
        return news

    def partner(self, candidates: Iterable[str]) -> str | None:
        """The next peer to gossip with, in turn from a shuffled list of ``candidates`` (each
        is asked once before any is asked again; SWIM's round-robin probe target)."""
        allowed = set(candidates) - {self.me}
        with self._lock:
            while self._turn and self._turn[-1] not in allowed:
                self._turn.pop()
            if not self._turn:
                self._turn = sorted(allowed)
                self._rng.shuffle(self._turn)
            return self._turn.pop() if self._turn else None

    def waiters(self, stream: str, peers: Iterable[str]) -> list[str]:
        """Of ``peers``, those a newly registered ``stream`` must be told of: whose record says
        a subscription there waits for it, and those whose record is not known yet."""
        with self._lock:
            return sorted(p for p in set(peers) - {self.me}
                          if (r := self.records.get(p)) is None or stream in r.waiting)

    def some(self, k: int, candidates: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
        """``k`` peers at random (pushes, indirect probes)."""
        pool = sorted(set(candidates) - {self.me} - set(exclude))
        return self._rng.sample(pool, min(k, len(pool)))

    # ------------------------------------------------------------------ verdicts

    def verdict(self, peer: str) -> Verdict:
        """Whether ``peer`` is up, as its watchers' records tell: down when one declared it
        down (its current process, directly and through others) and none hears it."""
        with self._lock:
            own = self.records.get(peer)
            declared = sorted(p for p, r in self.records.items() if p != peer and peer in r.down
                              and (own is None or r.declares(peer, own.epoch, own.alive)))
            heard = [p for p, r in self.records.items() if p != peer and peer in r.hears]
        if declared and not heard:
            return Verdict(False, f"declared down by {', '.join(declared)}: no answer to heartbeats, "
                                  "directly or through other super-peers")
        if own is not None or heard:
            return Verdict(True)
        return Verdict(None)


# ---------------------------------------------------------------------- what a heartbeat carries

@dataclass(frozen=True)
class Gossip:
    """A heartbeat as sent: ``digest`` "" asks for no records (an indirect probe's plain ping)."""

    sender: str
    digest: str = ""
    records: str = ""
    relay_to: str = ""


@dataclass(frozen=True)
class Answer:
    """A heartbeat's answer: the neighbours the peer hears, its process, the records the
    asker lacks, and whether ``relay_to`` answered."""

    peer: str
    hears: frozenset[str]
    incarnation: str
    records: str = ""
    relayed: bool = False
    digest_hash: str = ""  # of the answering peer's digest (what it holds)


@dataclass(frozen=True)
class Silence:
    """No answer: ``silent`` if the peer could not be reached (an error answer is not silence)."""

    reason: str
    silent: bool = True
