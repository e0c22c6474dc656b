"""Start real super-peers (gRPC servers on free loopback ports) for integration tests."""

from __future__ import annotations

import json
import math
import threading
import tomllib
from contextlib import contextmanager
from pathlib import Path

from lxml import etree

from superpeer.rpc.server import start_superpeer
from superpeer.security.tls import Security
from superpeer.topology import load_topology
from thinpeer.ops.certs import init_backbone
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology

ATTEMPTS = 3  # a free port found first may be taken by another process before the server binds it


def _on_free_ports(source, dest: Path, options, prepare=None) -> tuple:
    """Every super-peer of the topology ``source`` on free loopback ports (written to ``dest``),
    started with ``options(topology, peer)``; tried again on other ports if one was taken
    between being found free and bound. ``prepare(topology)`` runs first on each try."""
    for attempt in range(ATTEMPTS):
        topology = load_topology(with_free_ports(source, dest))
        if prepare is not None:
            prepare(topology)
        peers: dict = {}
        try:
            for peer in topology.backbone.peers:
                peers[peer] = start_superpeer(topology, peer, **options(topology, peer))
            return topology, peers
        except RuntimeError as exc:
            for running in peers.values():
                running.stop(grace=0)
            if "Failed to bind" not in str(exc) or attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _start(tmp_path: Path, name: str, retention: int, executor: str, limits=None, keys: Path | None = None,
           quotas=None, peer_options: dict | None = None):
    def prepare(topology) -> None:
        if keys is not None:  # a backbone CA and token key: mutual TLS between peers, tokens
            init_backbone(keys, {p: ["localhost", "127.0.0.1"] for p in topology.backbone.peers})

    def options(topology, peer: str) -> dict:
        extra: dict = {"retention": retention, "executor": executor}
        if limits is not None:
            extra["limits"] = limits
        if keys is not None:
            extra["security"] = Security.load(keys, peer)
        if quotas is not None:
            extra["quotas"] = quotas
        return {**extra, **(peer_options or {}).get(peer, {})}

    return _on_free_ports(shipped_topology(name), tmp_path / name, options, prepare)


@contextmanager
def running_network(tmp_path: Path, name: str = "paper-example.toml", retention: int = 100_000,
                    executor: str = "inline", limits=None, keys: Path | None = None, quotas=None,
                    peer_options: dict | None = None):
    """``limits``: a ``superpeer.data.limits.DataLimits`` for every peer (default: the daemon's);
    ``keys``: serve securely with a backbone directory made there (``thinpeer.ops.certs``);
    ``peer_options``: per peer, more ``start_superpeer`` arguments (``archive``, ``history``)."""
    topology, peers = _start(tmp_path, name, retention, executor, limits, keys, quotas, peer_options)
    try:
        for running in peers.values():
            running.node.heartbeat_once()
        yield topology, peers
    finally:
        for running in peers.values():
            running.stop(grace=0)


def same(ours: list[str], theirs: list[str]) -> bool:
    """Item-identical, except numbers that may differ in the last bits where window aggregates
    were merged from a finer shared stream."""
    if len(ours) != len(theirs):
        return False
    for a, b in zip(ours, theirs):
        if a == b:
            continue
        ea, eb = etree.fromstring(a), etree.fromstring(b)
        ta, tb = list(ea.itertext()), list(eb.itertext())
        if len(ta) != len(tb) or not all(x == y or _close(x, y) for x, y in zip(ta, tb)):
            return False
        # the same elements, with the same attributes (their values numbers as close as texts)
        for x, y in zip(ea.iter(), eb.iter()):
            if x.tag != y.tag or list(x.attrib) != list(y.attrib) or not all(
                    v == y.attrib[k] or _close(v, y.attrib[k]) for k, v in x.attrib.items()):
                return False
        if sum(1 for _ in ea.iter()) != sum(1 for _ in eb.iter()):
            return False
    return True


def _close(x: str, y: str) -> bool:
    try:
        return math.isclose(float(x), float(y), rel_tol=1e-12)
    except ValueError:  # not numbers, and not equal
        return False


def reference_results(query: str, items: list[str], root: str = "photons") -> list[str]:
    """The invariant every subscriber's output is held to: the reference evaluator over the
    published document (nothing lost, nothing twice, order kept)."""
    from sharing.analysis import analyze
    from wxquery.evaluator import evaluate
    from wxquery.stream_document import StreamDocument

    doc = StreamDocument.from_text(f"<{root}>" + "".join(items) + f"</{root}>")
    return list(evaluate(analyze(query).checked, doc).serialized_items())


def photon_windows(photons: list[str], span: float = 20.0) -> dict[int, dict[str, float]]:
    """The true count and sum of energies per time window k, det_time in [k·span, k·span + span):
    what approximate windows' intervals are checked against."""
    truth: dict[int, dict[str, float]] = {}
    for text in photons:
        el = etree.fromstring(text)
        w = truth.setdefault(math.floor(float(el.findtext("det_time")) / span), {"count": 0.0, "sum": 0.0})
        w["count"] += 1
        w["sum"] += float(el.findtext("en"))
    return truth


def until(condition, seconds: float = 30.0, pause: float = 0.05, what=None):
    """Poll ``condition`` until it gives something true (returned), failing after ``seconds``
    (saying ``what()`` was seen last): tests wait on conditions with deadlines, not fixed sleeps."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"condition not met in time{': ' + what() if what else ''}"
        time.sleep(pause)


def paper_example_part(peers: set[str], dest: Path) -> Path:
    """The paper example cut down to ``peers`` and the links between them, written to ``dest``
    on free ports: a test that needs only a route of it (SP4→SP5→SP1, say) starts no more
    super-peers — each with an executor of its own — than the route has."""
    shipped = tomllib.loads(shipped_topology("paper-example").read_text())

    def block(kind: str, entry: dict) -> str:
        return f"[[{kind}]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in entry.items())

    kept = [block("superpeer", p) for p in shipped["superpeer"] if p["id"] in peers]
    kept += [block("link", link) for link in shipped["link"] if {link["a"], link["b"]} <= peers]
    source = dest.with_suffix(".part.toml")
    source.write_text("\n".join(kept))
    return with_free_ports(source, dest)


def start_own_topology(tmp_path: Path, toml: str, options: dict[str, dict] | None = None) -> tuple:
    """Every super-peer of a topology written out here (``toml``), on free loopback ports, each
    with its ``start_superpeer`` ``options``: (topology, {peer: running}); stop them when done."""
    source = tmp_path / "own-topology.toml"
    source.write_text(toml)
    return _on_free_ports(source, tmp_path / "own-topology-ports.toml",
                          lambda topology, peer: (options or {}).get(peer, {}))


class SteadyPublisher:
    """Publishes ``items`` from ``at`` on in batches at ``rate`` items a second, in a thread,
    until ``finish`` (which closes the stream): the steady publish of live migration tests.
    ``published`` is how many of ``items`` have been accepted so far."""

    def __init__(self, client, stream: str, items: list[str], at: int, batch: int, rate: float) -> None:
        self.client, self.stream, self.items, self.batch, self.rate = client, stream, items, batch, rate
        self.published, self.errors = at, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> SteadyPublisher:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and self.published < len(self.items):
                at = self.published
                self.client.publish(self.stream, self.items[at:at + self.batch], rate=self.rate, position=at,
                                    retry_s=120)
                self.published = at + self.batch
            self.client.close_stream(self.stream)
        except BaseException as exc:  # noqa: BLE001 - reported by ``finish``
            self.errors.append(exc)

    def finish(self, timeout: float = 120.0) -> int:
        """Stop, close the stream, and return how many items were published; fails on an error."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the publisher did not finish in time"
        assert not self.errors, self.errors
        return self.published
