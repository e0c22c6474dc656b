"""One phase of ``sharing_over_time``: a fresh grid-4x4 network of daemon processes, photons
published at a steady rate for the whole phase, the timeline's events applied one per window,
and every super-peer's link counters sampled every couple of seconds.

What is measured is the backbone's bytes per published item: the bytes every link carried
between two samples (summed over all links, both ways) divided by the items the source took
between them. A daemon's counters start from zero when it starts again: the sampler is told
(``restarted``), and a counter that went down counts from zero anyway, so a restart never
subtracts bytes.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from photons.generator import generate
from thinpeer.client import SuperPeerClient, ThinPeerError
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.processes import LocalNetwork, NetworkError, cut_link, up
from thinpeer.ops.topologies import shipped_topology

from sharing_model import link_name
from sharing_workload import BY_NAME, SOURCE_PEER, STREAM, Event, Timeline

WARMUP_ITEMS = 500  # published before anything is subscribed: the source's statistics
GENERATOR = {"rate": 1000.0, "start_time": 130.0}  # det_time: no flare of the generator's hard
# source for the first 470 000 photons, so the selections' sizes do not change during a run


class PhotonTexts:
    """The photons every phase publishes, in order, generated as they are needed (the same
    seed, the same photons: the model pushes the very items a window published)."""

    def __init__(self, seed: int) -> None:
        self._generator = generate(None, seed, **GENERATOR)
        self.texts: list[str] = []
        self._lock = threading.Lock()

    def between(self, start: int, end: int) -> list[str]:
        """The photons numbered ``start`` up to (not including) ``end``."""
        with self._lock:
            while len(self.texts) < end:
                self.texts.append(next(self._generator).to_xml())
            return self.texts[start:end]


@dataclass
class Sample:
    t: float  # seconds since the phase's first event
    items: int  # the source's accepted items so far
    bytes: int  # backbone bytes so far, every link, both ways
    links: dict[str, int]  # the same per link (``SP1–SP2``)


@dataclass
class PhaseResult:
    mode: str
    flags: list[str]
    event_times: list[float] = field(default_factory=list)  # when each event began (phase seconds)
    event_seconds: list[float] = field(default_factory=list)  # how long applying it took: its
    # window begins when it is done
    end: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    subscriptions: dict[str, str] = field(default_factory=dict)  # selection -> subscription id
    plans: dict[str, str] = field(default_factory=dict)  # selection -> its plan when registered
    window_plans: list[dict[str, dict]] = field(default_factory=list)  # at each window's end
    window_streams: list[dict[str, dict]] = field(default_factory=list)  # likewise: what flows where
    rejected: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    published: int = 0
    wall_seconds: float = 0.0


class Sampler(threading.Thread):
    """Every ``every`` seconds: every super-peer's link counters, the source's count first."""

    def __init__(self, network: LocalNetwork, every: float, started: float, result: PhaseResult) -> None:
        super().__init__(daemon=True)
        self.every, self.started, self.result = every, started, result
        self.clients = {p: SuperPeerClient(a, timeout=5.0, credentials=network.credentials)
                        for p, a in network.addresses.items()}
        self.last: dict[str, int] = {}  # directed link -> its counter at the last sample
        self.totals: dict[str, int] = {}  # undirected link -> bytes so far
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def restarted(self, peer: str) -> None:
        """``peer`` starts again: its counters start from zero."""
        with self.lock:
            for link in [k for k in self.last if k.startswith(f"{peer}->")]:
                self.last[link] = 0

    def sample(self) -> None:
        t = time.monotonic() - self.started
        items = None
        counters: dict[str, int] = {}
        for peer in [SOURCE_PEER] + [p for p in self.clients if p != SOURCE_PEER]:
            try:
                status = self.clients[peer].status()
            except ThinPeerError:
                continue  # (down: it sends nothing; its counters are read again when it is back)
            if peer == SOURCE_PEER:
                items = status["streams_registered_here"].get(STREAM, {}).get("accepted", 0)
            counters.update({link: c["bytes"] for link, c in status["links"].items()})
        if items is None:
            self.result.errors.append(f"t={t:.1f}s: the source did not answer status")
            return
        with self.lock:
            for link, value in counters.items():
                before = self.last.get(link, 0)
                grown = value - before if value >= before else value
                self.last[link] = value
                a, b = link.split("->")
                self.totals[link_name(a, b)] = self.totals.get(link_name(a, b), 0) + grown
            self.result.samples.append(Sample(round(t, 3), items, sum(self.totals.values()), dict(self.totals)))

    def run(self) -> None:
        while not self.stop.wait(self.every - (time.monotonic() - self.started) % self.every):
            self.sample()

    def close(self) -> None:
        self.stop.set()
        self.join(30)
        self.sample()
        for client in self.clients.values():
            client.close()


class Publisher(threading.Thread):
    """The photons, ``rate`` a second in batches ten times a second, for the whole phase."""

    def __init__(self, client: SuperPeerClient, photons: PhotonTexts, first: int, rate: float,
                 errors: list[str]) -> None:
        super().__init__(daemon=True)
        self.client, self.photons, self.next, self.rate, self.errors = client, photons, first, rate, errors
        self.stop = threading.Event()

    def run(self) -> None:
        started, sent = time.monotonic(), 0
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate) - sent
            if due > 0:
                batch = self.photons.between(self.next, self.next + due)
                try:
                    self.client.publish(STREAM, batch)
                except ThinPeerError as exc:
                    self.errors.append(f"publish: {exc}")
                self.next += due
                sent += due
            self.stop.wait(0.1)


def run_phase(mode: str, flags: Sequence[str], timeline: Timeline, window_s: float, rate: float,
              sample_s: float, photons: PhotonTexts, progress: Callable[[str], None]) -> PhaseResult:
    """The timeline on a fresh network whose daemons get ``flags``; raises ``NetworkError``
    when they do not start (e.g. flags they do not know)."""
    result = PhaseResult(mode, list(flags))
    wall = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="streamglobe-sharing-") as tmp:
        path = with_free_ports(shipped_topology("grid-4x4"), Path(tmp) / "grid-4x4.toml")
        network = up(path, state_dir=Path(tmp) / "state", serve_args=tuple(flags))
        try:
            _run(network, result, timeline, window_s, rate, sample_s, photons, progress)
        finally:
            network.stop()
    result.wall_seconds = round(time.monotonic() - wall, 1)
    return result


def _run(network: LocalNetwork, result: PhaseResult, timeline: Timeline, window_s: float, rate: float,
         sample_s: float, photons: PhotonTexts, progress: Callable[[str], None]) -> None:
    source = network.client(SOURCE_PEER)
    source.register_stream(STREAM, "photons", "photon", rate=rate)
    source.publish(STREAM, photons.between(0, WARMUP_ITEMS))
    time.sleep(1.2)  # one heartbeat round: every super-peer learns the stream and its statistics
    publisher = Publisher(network.client(SOURCE_PEER), photons, WARMUP_ITEMS, rate, result.errors)
    started = time.monotonic()
    sampler = Sampler(network, sample_s, started, result)
    sampler.sample()
    publisher.start()
    sampler.start()
    # A window lasts ``window_s`` from the moment its event is done (a restart under load takes
    # seconds), and begins half a sampling interval after a sample: its last sample is never
    # taken while the next event is being applied.
    def next_event(after: float) -> float:
        return round((after - sample_s / 2) / sample_s) * sample_s + sample_s / 2

    at = sample_s / 2
    try:
        for k, event in enumerate(timeline.events):
            wait = at - (time.monotonic() - started)
            if wait > 0:
                time.sleep(wait)
            if k:
                result.window_plans.append(live_plans(network, result))
                result.window_streams.append(live_streams(network))
            began = time.monotonic()
            result.event_times.append(round(began - started, 3))
            progress(f"{result.mode}: t={began - started:5.1f}s {event.label()}")
            try:
                _apply(network, event, result, sampler)
            except (ThinPeerError, NetworkError) as exc:
                result.errors.append(f"{event.label()}: {exc}")
                progress(f"{result.mode}:   failed: {exc}")
            done = time.monotonic() - started
            result.event_seconds.append(round(done + started - began, 3))
            at = next_event(done + window_s)
        wait = at - (time.monotonic() - started)
        if wait > 0:
            time.sleep(wait)
        result.end = round(time.monotonic() - started, 3)
        result.window_plans.append(live_plans(network, result))
        result.window_streams.append(live_streams(network))
    finally:
        sampler.close()
        publisher.stop.set()
        publisher.join(30)
        result.published = publisher.next


def live_streams(network: LocalNetwork) -> dict[str, dict]:
    """Every stream the super-peers' tables hold now, but the originals: its route, its users
    and the peers that hold it — a stream that carries bytes no live plan reads shows here (one
    being removed after a move, or one left behind)."""
    out: dict[str, dict] = {}
    for peer in network.addresses:
        try:
            with network.client(peer, timeout=5.0) as client:
                table = client.status().get("stream_table", [])
        except ThinPeerError:
            continue
        for s in table:
            if s.get("original"):
                continue
            entry = out.setdefault(s["id"], {"route": "→".join(s["route"]), "users": set(), "held_at": []})
            entry["users"].update(s.get("users", []))
            entry["held_at"].append(peer)
    return {sid: {**e, "users": sorted(e["users"])} for sid, e in sorted(out.items())}


def live_plans(network: LocalNetwork, result: PhaseResult) -> dict[str, dict]:
    """Each live subscription's plan as its super-peer has it now (after any re-plan): the
    stream it reads, where, the route, and how often it was planned again after a failure."""
    out: dict[str, dict] = {}
    for name, sid in result.subscriptions.items():
        try:
            with network.client(BY_NAME[name].peer, timeout=5.0) as client:
                entry = client.status()["subscriptions"][sid]
        except (ThinPeerError, KeyError) as exc:
            out[name] = {"error": str(exc)}
            continue
        parts = entry.get("plan", {}).get("parts", [])
        out[name] = {"reads": [f"{p['reused_stream']} at {p['reuse_peer']}" for p in parts],
                     "routes": ["→".join(p["route"]) for p in parts],
                     "health": entry.get("health", {}).get("state"),
                     "replans": entry.get("health", {}).get("replans"),
                     "last_failure": entry.get("health", {}).get("last_failure"),
                     # (why its last round kept it, and its last re-plans: why a window missed)
                     "reoptimisation": entry.get("reoptimisation"),
                     "plan_history": entry.get("plan_history", [])[-3:]}
    return out


def _apply(network: LocalNetwork, event: Event, result: PhaseResult, sampler: Sampler) -> None:
    if event.kind in ("start", "subscribe"):
        for name in event.names:
            selection = BY_NAME[name]
            try:
                with network.client(selection.peer) as client:
                    reply = client.subscribe(selection.text())
                result.subscriptions[name] = reply.subscription
                result.plans[name] = " | ".join(line.strip() for line in reply.description.splitlines()[1:])
            except ThinPeerError as exc:
                result.rejected.append(f"{name} at {selection.peer}: {exc}")
    elif event.kind == "unsubscribe":
        for name in event.names:
            sid = result.subscriptions.pop(name, None)
            if sid is not None:
                with network.client(BY_NAME[name].peer) as client:
                    client.unsubscribe(sid)
    elif event.kind == "kill":
        network.kill(event.peers[0])
    elif event.kind == "restart":
        sampler.restarted(event.peers[0])
        network.start(event.peers[0])
    elif event.kind in ("cut", "restore"):
        a, b = event.peers
        cut_link(network.state_dir, a, b, event.kind == "cut", network.credentials)
    else:
        raise ValueError(f"unknown event {event.kind}")


def daemon_accepts(flags: Sequence[str]) -> bool:
    """Whether ``superpeer serve`` knows every flag of ``flags`` (its --help names them):
    asked once before a phase, instead of 16 daemons failing to start."""
    import subprocess

    names = [f for f in flags if f.startswith("--")]
    if not names:
        return True
    done = subprocess.run([sys.executable, "-m", "thinpeer.cli", "superpeer", "serve", "--help"],
                          capture_output=True, text=True, timeout=60)
    return done.returncode == 0 and all(name in done.stdout for name in names)
