"""The heartbeat rounds of one super-peer: watch its neighbours, gossip with one other peer each
interval, then do what depends on what it learnt.

A round asks each backbone neighbour and one other peer in turn how it is
(``Transport.heartbeat_round``), each question carrying this peer's digest of the records it
holds and its own record when that changed (``membership``). The neighbours' answers and
silences go to the failure detector (``failure_detector``); a neighbour declared down that no
one else is known to hear is probed through two other peers (SWIM's indirect probe) before this
peer declares it down in its record. Every answer brings the records this peer lacked: each
peer's usage (what planners here read of it), the streams registered there (a peer that just
started learns them so), the first item of each stream its subscriptions may still replay (what
the history here must keep), and whom it hears and declared down (the verdicts on peers this
one does not watch). A record whose change failure handling waits for is pushed at once to
``FANOUT`` peers, which pass it on once. A round's messages do not grow with the network: its
neighbours plus one.

Then the round's jobs run, each on its own so that one that fails does not keep the others
from running: re-planning broken routes (``replanning``), watermarks of idle streams, trimming
the history, activating subscriptions whose stream's announcement was missed. A heartbeat's
answer is ``reply``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from sharing.serialization import stream_from_json, stream_to_json

from ..peer_state import PeerState
from .failure_detector import FailureDetector
from .membership import (SAME, Answer, Gossip, Membership, Record, Silence, records_from_json, records_to_json,
                         settled_usage)

log = logging.getLogger("streamglobe.superpeer")

FANOUT = 3  # peers an urgent record is pushed to, by its author and by each peer it is news to
RELAYS = 2  # peers asked to reach a silent neighbour before it is declared down
RELAY_EVERY = 5  # rounds between indirect probes of a neighbour that stays down


class HeartbeatTransport(Protocol):
    detector: FailureDetector
    epoch: str  # this process's incarnation, as the others hear it

    def heartbeat_round(self, requests: dict[str, Gossip]) -> dict[str, Answer | Silence]:
        """Ask each peer at once; its answer, or why there was none, within an interval."""
        ...

    def gossip(self, requests: dict[str, Gossip], answered: Callable[[Answer], None]) -> None:
        """Send without waiting; ``answered`` is called with each answer as it comes."""
        ...

    def relay_probe(self, relays: Sequence[str], target: str) -> bool:
        """Whether any of ``relays`` reaches ``target`` (an indirect probe)."""
        ...

    def probe(self, target: str) -> bool:
        """Whether ``target`` answers a plain heartbeat now (for another peer's indirect probe)."""
        ...


class Heartbeats:
    def __init__(self, state: PeerState, transport: HeartbeatTransport,
                 jobs: Sequence[tuple[str, Callable[[], None]]], own_pins: Callable[[], dict[str, int]],
                 waited_for: Callable[[], Iterable[str]] = tuple) -> None:
        """``jobs``: what runs after each round, in order, by name (for the log of a failure);
        ``own_pins``: the first item of each stream the subscriptions here may replay;
        ``waited_for``: the streams subscriptions here wait for (not registered yet)."""
        self.state = state
        self.transport = transport
        self.jobs = list(jobs)
        self.own_pins = own_pins
        self.waited_for = waited_for
        self.membership = Membership(state.id, transport.epoch, time.time())
        self._lock = threading.RLock()  # (the round and the answers to others both write the detector)
        self._sent: dict[str, tuple] = {}  # peer -> stamp of this peer's record last sent to it
        self._theirs: dict[str, str] = {}  # peer -> the digest hash it answered with last
        self._since_relay: dict[str, int] = {}  # silent neighbour -> rounds since its indirect probe
        self._late = 0.0  # how late the round running began (``LocalHealth``)
        self._declared: dict[str, tuple[str, int]] = {}  # neighbour declared down -> (epoch, alive) declared at
        self._refuted: dict[str, int] = {}  # neighbour -> declarations of it refuted while still silent here
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def detector(self) -> FailureDetector:
        return self.transport.detector

    def start(self) -> None:
        self._author()
        self._thread = threading.Thread(target=self._loop, name=f"hb-{self.state.id}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        interval = self.detector.settings.interval_s
        while True:
            slept = time.monotonic()
            if self._stop.wait(interval):
                return
            self._late = time.monotonic() - slept - interval  # (this process's own delay)
            try:
                self.once()
            except Exception:  # noqa: BLE001 - failure detection must go on, whatever failed
                log.exception("%s: a heartbeat round failed", self.state.id)

    # ------------------------------------------------------------------ a round

    def once(self) -> None:
        """One round: the neighbours and one gossip partner, then the jobs."""
        state, detector = self.state, self.detector
        self.changed()  # (what changed since the last round: hearing, declarations, usage)
        neighbours = sorted(detector.neighbours)
        partner = self.membership.partner(p for p in state.backbone.peers if p not in detector.neighbours)
        targets = neighbours + ([partner] if partner is not None else [])
        digest, mine = self.membership.digest_and_hash()
        asked = time.monotonic()
        answers = self.transport.heartbeat_round({p: self._gossip(p, digest, mine) for p in targets})
        now = time.time()
        news: list[tuple[Record, Record | None]] = []
        with self._lock:
            late, self._late = self._late, 0.0
            if detector.health.observe(late, time.monotonic() - asked, detector.settings.interval_s) \
                    and detector.health.score == 1:  # (said when it begins to be slow)
                log.info("%s: this super-peer is slow (round %.2f s late): %d missed heartbeats "
                         "declare a neighbour down", state.id, late,
                         detector.settings.misses + detector.health.score)
            for peer, answer in answers.items():
                if isinstance(answer, Answer):
                    self._theirs[peer] = answer.digest_hash
                    if peer in detector.neighbours:
                        detector.heard(peer, now, answer.hears, answer.incarnation)
                    news += self.membership.merge(records_from_json(answer.records))
                else:
                    self._sent.pop(peer, None)  # (it may have missed this peer's record)
                    self._theirs.pop(peer, None)
                    if peer in detector.neighbours and answer.silent:
                        detector.missed(peer, now, answer.reason)
                    elif peer in detector.neighbours:  # it answered, with an error: alive
                        detector.heard(peer, now)
            urgent = self._take(news)
        self._push(urgent, exclude=set(answers))
        self._probe_indirectly()
        self.changed()
        for name, job in self.jobs:
            try:
                job()
            except Exception:  # noqa: BLE001 - the next jobs must still run
                log.exception("%s: %s failed after a heartbeat round", state.id, name)

    def _gossip(self, peer: str, digest: str, mine: str) -> Gossip:
        """The question to ``peer``: this peer's digest (its hash ``mine`` alone when ``peer``
        answered last with that hash: they hold the same records), and its own record if
        ``peer`` has not been sent this version yet."""
        if mine and self._theirs.get(peer) == mine:
            digest = SAME + mine
        own = self.membership.own()
        if own is None or self._sent.get(peer) == own.stamp:
            return Gossip(self.state.id, digest)
        self._sent[peer] = own.stamp
        return Gossip(self.state.id, digest, records_to_json([own]))

    def _author(self) -> bool:
        """This peer's record as it is now; whether it changed in a way pushed at once."""
        state = self.state
        with state.lock:
            originals = tuple(stream_to_json(s) for n in state.originals if (s := state.table.get(n)) is not None)
            pins = self.own_pins()
        with self._lock:
            declared = self.detector.declared()
            for n in set(self._declared) - set(declared):
                del self._declared[n]
            for n, epoch in declared.items():
                if self._declared.get(n, ("",))[0] != epoch:  # (at the count held when declared)
                    self._declared[n] = (epoch, self.membership.alive_of(n, epoch))
            _, urgent = self.membership.author(time.time(), self.detector.hearing(), dict(self._declared),
                                               settled_usage(state.usage_report()), originals, pins,
                                               self.waited_for())
        return urgent

    def changed(self) -> None:
        """This peer's record made anew, pushed at once if what changed is urgent: in each
        round, and when a subscription begins to wait for a stream (its super-peer tells only
        the peers whose records say they wait for it)."""
        if self._author():
            self._push([self.membership.own()], exclude=())

    def waiters(self, stream: str) -> list[str]:
        """The peers a newly registered ``stream`` must be told of (``Membership.waiters``)."""
        return self.membership.waiters(stream, self.state.backbone.peers)

    def _probe_indirectly(self) -> None:
        """Neighbours silent here that no one else is known to hear: asked through ``RELAYS``
        other peers, right when declared down and every ``RELAY_EVERY`` rounds after — twice
        as long after each refutation of its declaration (a peer that can gossip but not
        answer, as a one-way cut, is not declared and refuted every few rounds for ever). A
        probe nobody answers declares it again, at the alive count of its newest record."""
        detector = self.detector
        for n in sorted(detector.neighbours):
            h = detector.peers.get(n)
            if h is not None and h.up:
                with self._lock:
                    self._refuted.pop(n, None)
            if h is None or h.up is not False or detector.heard_by_others(n):
                self._since_relay.pop(n, None)
                continue
            every = RELAY_EVERY * 2 ** min(self._refuted.get(n, 0), 4)
            rounds = self._since_relay.get(n, every)
            if rounds < every:
                self._since_relay[n] = rounds + 1
                continue
            self._since_relay[n] = 1
            up = [p for p in self.state.backbone.peers if detector.peer_state(p) == "up"]
            relays = self.membership.some(RELAYS, up, exclude={n})
            reached = bool(relays) and self.transport.relay_probe(relays, n)
            with self._lock:
                detector.relay_result(n, reached)
                if not reached and n in self._declared:
                    epoch = self._declared[n][0]
                    self._declared[n] = (epoch, self.membership.alive_of(n, epoch))

    # ------------------------------------------------------------------ what records tell

    def _take(self, news: Iterable[tuple[Record, Record | None]]) -> list[Record]:
        """(with ``_lock`` held) What the new records tell; returns the urgent ones, for the
        caller to pass on outside the lock (each peer passes a record on once: the first time
        it is news to it)."""
        state, detector = self.state, self.detector
        urgent, concerned = [], set()
        for record, old in news:
            concerned |= record.concerns(old)
            detector.reported(record.peer, record.hears, record.epoch)
            if record.usage:
                state.peer_usage[record.peer] = dict(record.usage)
            state.peer_pins[record.peer] = dict(record.pins)
            state.round_heard[record.peer] = record.made_at  # (its pins are those of that moment)
            with state.lock:
                for j in record.originals:  # (a peer speaks for the streams registered there only)
                    if j.get("origin") == record.peer and j.get("id") not in state.known_originals:
                        s = stream_from_json(dict(j))
                        if s.original:
                            state.known_originals[s.id] = s
                            state.heard_of[s.id] = time.time()
            if record.urgent_change(old):
                urgent.append(record)
            if old is not None and record.epoch != old.epoch:  # (a new process: its own count)
                self._refuted.pop(record.peer, None)
                self._since_relay.pop(record.peer, None)
            if record.peer in detector.neighbours and self.membership.refutes_mine(record, old):
                # (it ran after the declaration, but may have crashed since: the next indirect
                # probe decides, and declares it again at its new count if nobody reaches it)
                self._refuted[record.peer] = self._refuted.get(record.peer, 0) + 1
        self._judge(concerned)
        if self.membership.refute(r for r, _ in news):
            log.warning("%s: declared down by %s while running: refuted", state.id,
                        ", ".join(sorted(r.peer for r, _ in news if state.id in r.down)))
            if self._author():
                urgent.append(self.membership.own())
        return urgent

    def _judge(self, peers: Iterable[str]) -> None:
        """(with ``_lock`` held) The records' verdicts on ``peers``, those this one does not watch."""
        now = time.time()
        for peer in sorted(set(peers)):
            if peer != self.state.id and peer not in self.detector.neighbours and peer in self.state.backbone.peers:
                v = self.membership.verdict(peer)
                self.detector.judged(peer, v.up, now, v.reason)

    def _push(self, records: list[Record | None], exclude: Iterable[str]) -> None:
        records_ = [r for r in records if r is not None]
        if not records_:
            return
        authors = {r.peer for r in records_}
        to = self.membership.some(FANOUT, self.state.backbone.peers, exclude={*exclude, *authors})
        text, digest = records_to_json(records_), self.membership.digest_json()
        self.transport.gossip({p: Gossip(self.state.id, digest, text) for p in to}, self._answered)

    def _answered(self, answer: Answer) -> None:
        """An answer to a push: the records it brought."""
        with self._lock:
            urgent = self._take(self.membership.merge(records_from_json(answer.records)))
        self._push(urgent, exclude={answer.peer})

    # ------------------------------------------------------------------ answering

    def reply(self, request: Gossip) -> Answer:
        """The answer to another peer's heartbeat: take the records it pushed, probe for it if
        asked, and send back the records its digest lacks."""
        relayed = bool(request.relay_to) and self.transport.probe(request.relay_to)
        if request.records:
            with self._lock:
                urgent = self._take(self.membership.merge(records_from_json(request.records)))
            self._push(urgent, exclude={request.sender})
        missing = self.membership.missing_for(request.digest) if request.digest else []
        return Answer(self.state.id, frozenset(self.detector.hearing()), self.transport.epoch,
                      records_to_json(missing) if missing else "", relayed,
                      self.membership.digest_hash() if request.digest else "")

    def status(self) -> dict:
        """``status`` → ``membership``: the records held (of how many peers), this peer's own
        version and alive count, the neighbours it declares down (at which count, and how often
        they refuted), the streams each peer's subscriptions wait for, and what a round asks
        (its neighbours and one gossip partner)."""
        with self._lock:  # (the round and the answers to others change what it reads)
            return self._status()

    def _status(self) -> dict:
        own, peers = self.membership.own(), len(self.state.backbone.peers)
        return {"records": len(self.membership.records), "peers": peers,
                "version": own.version if own is not None else None,
                "alive": self.membership.alive,  # (declarations of this process it refuted)
                "declared": {n: {"epoch": e, "alive": a, "refuted": self._refuted.get(n, 0)}
                             for n, (e, a) in sorted(self._declared.items())},
                "waiting": {p: list(r.waiting) for p, r in sorted(self.membership.records.items()) if r.waiting},
                "asks_per_round": len(self.detector.neighbours) + (peers > 1 + len(self.detector.neighbours))}
