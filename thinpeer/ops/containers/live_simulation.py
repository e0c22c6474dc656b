"""``streamglobe deploy simulate``: the multi-peer simulation run live, in containers.

Per strategy, a fresh network of containers for the scenario's topology: the sources are
registered at their super-peers (with a sample of photons, so that every peer has statistics),
the subscriptions are registered with the strategy, photons are published, the streams closed,
and every delivered result is read and checked against the reference evaluator. The report has
the in-process simulator's shape (``sharing.simulator``), so the same tables and Figure 6/7-style
plots come out; traffic is **measured** on the links (the super-peers' link counters) and load is
the daemons' CPU time, next to the cost model's prediction (the peers' reserved usage) for the
same photons at the sources' declared rate.
"""

from __future__ import annotations

import json
import statistics as pystats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from photons.generator import generate
from sharing.analysis import analyze
from sharing.planner import Strategy
from sharing.scenarios import Scenario
from sharing.simulator import STATISTICS_SAMPLE, WARM_UP, accuracy, compare_results
from thinpeer.client import SuperPeerClient, ThinPeerError
from thinpeer.credentials import Credentials
from thinpeer.ops.containers.project import credentials
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

from .compose import toml_tables
from .images import DeployError

Progress = Callable[[str], None]
CLI = [sys.executable, "-m", "thinpeer.cli"]


def topology_toml(scenario: Scenario) -> str:
    """The scenario's backbone as a topology file (the containers get their own addresses)."""
    backbone = scenario.backbone
    peers = [{"id": p.id, "address": "0.0.0.0:50051", "load_capacity": p.load_capacity, "pindex": p.pindex}
             for p in backbone.peers.values()]
    links = [{"a": link.a, "b": link.b, "bandwidth": link.bandwidth} for link in backbone.links.values()]
    return toml_tables({"superpeer": peers, "link": links})


def _cli(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


SILENT_BEATS = 10  # heartbeats missed before a peer is declared down in a simulation


def run_strategy(scenario: Scenario, strategy: Strategy, photons: int, state: Path, project: str,
                 executor: str, progress: Progress, spark_workers: int = 0) -> dict:
    topology = state / f"{scenario.name}.toml"
    topology.write_text(topology_toml(scenario))
    progress(f"{strategy.value}: starting {len(scenario.backbone.peers)} super-peer containers")
    # (it measures the cost model: on a loaded machine a busy peer's late heartbeats look like a
    # crash, and the failure's re-plan refills streams from the log — traffic no plan prices;
    # a peer is declared down only after 10 s of silence)
    up = _cli("deploy", "up", "--topology", str(topology), "--project", project, "--state-dir", str(state),
              "--executor", executor, "--spark-cluster", str(spark_workers), "--heartbeat-misses", str(SILENT_BEATS))
    if up.returncode != 0:
        raise DeployError(f"deploy up failed: {up.stderr.strip()}")
    address = json.loads(up.stdout)
    try:
        return _measure(scenario, strategy, photons, address, progress, credentials(state / project))
    finally:
        _cli("deploy", "down", "--project", project, "--state-dir", str(state), timeout=300)


def _measure(scenario: Scenario, strategy: Strategy, photons: int, address: dict[str, str],
             progress: Progress, creds: Credentials) -> dict:
    items = {s.name: [p.to_xml() for p in generate(STATISTICS_SAMPLE + photons, s.seed, rate=10.0)]
             for s in scenario.sources}
    publishers = {}
    for s in scenario.sources:
        publishers[s.name] = SuperPeerClient(address[s.peer], credentials=creds)
        publishers[s.name].register_stream(s.name, "photons", "photon", rate=s.rate)
        publishers[s.name].publish(s.name, items[s.name][:STATISTICS_SAMPLE])
    time.sleep(1.5)  # a heartbeat round: every peer has the sources' statistics
    registered, rejected, registration_ms = {}, [], []
    for i, q in enumerate(scenario.queries):
        client = SuperPeerClient(address[q.peer], credentials=creds)
        start = time.perf_counter()
        try:
            reply = client.subscribe(q.text, strategy=strategy.value)
            registered[q.id] = (client, reply.subscription)
        except ThinPeerError as exc:
            rejected.append({"subscription": q.id, "target": q.peer, "reason": exc.message})
        registration_ms.append((time.perf_counter() - start) * 1000)
        progress(f"{strategy.value}: registered {i + 1}/{len(scenario.queries)} "
                 f"({len(rejected)} rejected)")
    before = _statuses(address, creds)

    def publish(part: slice) -> None:
        for s in scenario.sources:
            publishers[s.name].publish(s.name, items[s.name][part],
                                       progress=lambda summary, n=s.name: progress(
                                           f"{strategy.value}: published {summary.accepted} photons on {n}"))

    # the warm-up's share first: what the links carry for it, scaled to every photon, is the
    # model of measured rates (as ``simulate`` learns it), once the links have drained
    warm = max(1, int(photons * WARM_UP))
    publish(slice(STATISTICS_SAMPLE, STATISTICS_SAMPLE + warm))
    warmed = _drained(address, creds)
    publish(slice(STATISTICS_SAMPLE + warm, None))
    for s in scenario.sources:
        publishers[s.name].close_stream(s.name)
    docs = {n: StreamDocument.from_text("<photons>" + "".join(v[STATISTICS_SAMPLE:]) + "</photons>")
            for n, v in items.items()}
    checked, mismatches = 0, []
    for qid, (client, sid) in registered.items():
        got = [item for _, item, _ in client.results(sid, idle_timeout=120)]
        query = next(q for q in scenario.queries if q.id == qid)
        expected = list(evaluate(analyze(query.text).checked, docs).serialized_items())
        problem = compare_results(got, expected)
        checked += 1
        if problem:
            mismatches.append(f"{qid}: {problem}")
        progress(f"{strategy.value}: verified {checked}/{len(registered)}")
    after = _statuses(address, creds)
    duration = max(photons / s.rate for s in scenario.sources)
    return _strategy_report(scenario, before, after, duration, registered, rejected, registration_ms,
                            checked, mismatches, (warmed, photons / warm))


def _statuses(address: dict[str, str], creds: Credentials) -> dict[str, dict]:
    return {p: SuperPeerClient(a, credentials=creds).status() for p, a in address.items()}


def _drained(address: dict[str, str], creds: Credentials, deadline_s: float = 60.0) -> dict[str, dict]:
    """Every peer's status once no link's byte counter moved for a second (or at the deadline)."""
    end, last = time.monotonic() + deadline_s, None
    while True:
        now = _statuses(address, creds)
        counts = {(p, n): c["bytes"] for p, st in now.items() for n, c in st["links"].items()}
        if counts == last or time.monotonic() > end:
            return now
        last = counts
        time.sleep(1.0)


def _link_bytes(before: dict[str, dict], after: dict[str, dict]) -> dict[frozenset, int]:
    """Bytes each backbone link carried (both directions) between two statuses of every peer."""
    measured: dict[frozenset, int] = {}
    for peer, status in after.items():
        for name, counters in status["links"].items():
            a, b = name.split("->")
            sent = counters["bytes"] - before[peer]["links"].get(name, {}).get("bytes", 0)
            measured[frozenset((a, b))] = measured.get(frozenset((a, b)), 0) + sent
    return measured


def _strategy_report(scenario, before, after, duration, registered, rejected, registration_ms,
                     checked, mismatches, warm_up: tuple[dict, float]) -> dict:
    """``warm_up``: every peer's status after the warm-up's photons, and how many times as many
    photons were published in all (the model of measured rates)."""
    measured = _link_bytes(before, after)
    learnt = {e: b * warm_up[1] for e, b in _link_bytes(before, warm_up[0]).items()}
    model: dict[frozenset, float] = {}
    for peer, status in after.items():
        for n, bits in status["load"].get("links", {}).items():
            model[frozenset((peer, n))] = model.get(frozenset((peer, n)), 0.0) + bits
    peers = {}
    for v, status in after.items():
        cpu = status["process_cpu_seconds"] - before[v]["process_cpu_seconds"]
        peers[v] = {"load_measured": cpu / duration, "load_estimate": status["load"].get("load", 0.0),
                    "load_capacity": scenario.backbone.peers[v].load_capacity,
                    "traffic_bytes": sum(b for e, b in measured.items() if v in e),
                    "traffic_estimate_bytes": round(sum(bits * duration / 8 for e, bits in model.items() if v in e))}
    links = {"–".join(sorted(e)): {"bytes": measured.get(e, 0),
                                   "estimate_bytes": round(model.get(e, 0.0) * duration / 8),
                                   **({"measured_model_bytes": round(learnt[e])} if e in learnt else {}),
                                   "bandwidth_bits_per_s": link.bandwidth}
             for e, link in scenario.backbone.links.items()}
    regs = registration_ms
    return {"registered": len(registered), "rejected": len(rejected), **replans_and_downs(after),
            "total_traffic_bytes": sum(measured.values()),
            "total_traffic_estimate_bytes": round(sum(model.values()) * duration / 8),
            "registration_ms": {"min": round(min(regs), 3) if regs else 0.0,
                                "avg": round(pystats.fmean(regs), 3) if regs else 0.0,
                                "max": round(max(regs), 3) if regs else 0.0},
            "verified": {"checked": checked, "identical": checked - len(mismatches), "mismatches": mismatches},
            "model_accuracy": accuracy(links),
            "peers": peers, "links": links, "rejections": rejected}


def replans_and_downs(status: dict[str, dict]) -> dict:
    """Why the traffic may differ from the plans registered: the subscriptions' re-plans by
    reason (a failure's re-plan moves a stream onto other links, and fills it from the log), and
    the peers each super-peer declared down meanwhile (on a loaded machine, a busy peer's late
    heartbeats look like a crash)."""
    reasons: dict[str, int] = {}
    for s in status.values():
        for sub in s.get("subscriptions", {}).values():
            for entry in sub.get("plan_history", []):
                why = entry.get("why", "").split(":")[0]
                reasons[why] = reasons.get(why, 0) + 1
    downs = {p: {q: d["times_down"] for q, d in s.get("failure_detector", {}).get("peers", {}).items()
                 if d.get("times_down")}
             for p, s in status.items()}
    return {"replans": dict(sorted(reasons.items())), "declared_down": {p: d for p, d in sorted(downs.items()) if d}}


def simulate_live(scenario: Scenario, photons: int, strategies: list[Strategy], executor: str,
                  project: str, progress: Progress, spark_workers: int = 0) -> dict:
    report: dict = {"scenario": scenario.name, "description": scenario.description, "live": True,
                    "executor": executor, "spark_workers": spark_workers, "super_peers": len(scenario.backbone.peers),
                    "links": len(scenario.backbone.links), "subscriptions": len(scenario.queries),
                    "photons_per_stream": photons,
                    "simulated_seconds": max(photons / s.rate for s in scenario.sources), "strategies": {}}
    with tempfile.TemporaryDirectory(prefix="sg-live-") as tmp:
        for strategy in strategies:
            report["strategies"][strategy.value] = run_strategy(
                scenario, strategy, photons, Path(tmp), project, executor, progress, spark_workers)
    return report

