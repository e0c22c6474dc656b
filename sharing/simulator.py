"""In-process network simulation: the paper's evaluation, reproduced and measured (§4).

For each strategy the same workload is registered in order; then generated photons are pushed
through every installed stream with the inline operators (each stream computed once from its
parent, as the network would), traffic is measured in bytes per link, CPU time per peer, and
every subscription's delivered results are post-processed at its peer and — with ``verify`` —
compared item by item with the reference evaluator over the original stream.
"""

from __future__ import annotations

import io
import math
import statistics as pystats
import time
from dataclasses import dataclass, field
from typing import Callable

from lxml import etree

from photons.generator import generate, write_document
from wxquery.evaluator import evaluate, post_process
from wxquery.operators.records import WindowRecord, serialize
from wxquery.operators.runner import run_operators
from wxquery.stream_document import StreamDocument

from .analysis import Analysis, analyze
from .backbone import peer_order
from .matching import raw_properties
from .network_state import NetworkState
from .planner import Plan, Planner, Strategy
from .properties import InputStream
from .scenarios import Scenario
from .statistics import StreamStatistics
from .subnet_planning import SubnetPlanner, is_relay
from .subnets import Subnets

STATISTICS_SAMPLE = 2000  # photons observed at least before planning
WARM_UP = 0.2  # the share of the photons the statistics and a measured model are learnt from


@dataclass
class StrategyResult:
    strategy: Strategy
    subnets: Subnets | None = None  # planned subnet by subnet (``subnet_planning``)
    plans: dict[str, Plan] = field(default_factory=dict)
    registration_ms: list[float] = field(default_factory=list)
    link_bytes: dict[frozenset[str], int] = field(default_factory=dict)
    peer_cpu_s: dict[str, float] = field(default_factory=dict)
    results: dict[str, int] = field(default_factory=dict)
    # bits/s per link the streams were measured to carry over the warm-up (the first ``WARM_UP``
    # of the photons): the model the live super-peers learn (``superpeer.data.stream_rates``)
    measured_model: dict[frozenset[str], float] = field(default_factory=dict)
    verified: int = 0
    mismatches: list[str] = field(default_factory=list)
    state: NetworkState | None = None

    @property
    def label(self) -> str:
        return f"{self.strategy.value}-subnets" if self.subnets is not None else self.strategy.value


def _documents(scenario: Scenario, photons: int) -> dict[str, str]:
    docs = {}
    for source in scenario.sources:
        buf = io.StringIO()
        write_document(buf, generate(photons, source.seed, rate=10.0))
        docs[source.name] = buf.getvalue()
    return docs


class Simulation:
    def __init__(self, scenario: Scenario, photons: int = 20000, verify: bool = True,
                 progress: Callable[[str], None] | None = None) -> None:
        self.scenario = scenario
        self.photons = photons
        self.verify = verify
        self.progress = progress or (lambda message: None)
        self.documents = _documents(scenario, photons)
        self.items = {name: list(StreamDocument.from_text(doc).items("photons", "photon"))
                      for name, doc in self.documents.items()}
        self.texts = {name: [serialize(x) for x in items] for name, items in self.items.items()}
        self.analyses: dict[str, Analysis] = {q.id: analyze(q.text) for q in scenario.queries}
        self._reference: dict[str, list[str]] = {}

    @property
    def duration_s(self) -> float:
        """Simulated seconds the pushed photons represent (at the sources' rate)."""
        return max(self.photons / s.rate for s in self.scenario.sources)

    # ------------------------------------------------------------------ one strategy

    def run(self, strategy: Strategy, subnets: Subnets | None = None) -> StrategyResult:
        """``subnets``: each subnet planned on its own, originals relayed between them."""
        result = StrategyResult(strategy, subnets)
        state = NetworkState(self.scenario.backbone)
        result.state = state
        for source in self.scenario.sources:
            stats = StreamStatistics(frequency=source.rate)
            # (what a super-peer has observed after the warm-up: a stream's contents vary in
            # time — the photons' flares — so its first seconds alone would mislead the model)
            for item in self.items[source.name][:max(STATISTICS_SAMPLE, int(self.photons * WARM_UP))]:
                stats.observe(item)
            inp = InputStream(source.name, ("photons", "photon"))
            state.register_original(inp, source.peer, raw_properties(inp), stats)
        planner = SubnetPlanner(state, subnets) if subnets is not None else Planner(state)
        for q in self.scenario.queries:
            start = time.perf_counter()
            plan = planner.subscribe(q.id, self.analyses[q.id].properties, q.peer, strategy)
            if plan.admitted:
                planner.install(plan)
            result.registration_ms.append((time.perf_counter() - start) * 1000)
            result.plans[q.id] = plan
        self.progress(f"{result.label}: {sum(p.admitted for p in result.plans.values())} of "
                      f"{len(result.plans)} subscriptions admitted; pushing photons")
        self._push(state, result)
        result.measured_model = self._measured_model(state)
        return result

    def _measured_model(self, state: NetworkState) -> dict[frozenset[str], float]:
        """Each stream's rate over the warm-up (its bytes over the first photons' simulated
        time), on every link of its route: what a model priced with measured rates says."""
        content: dict[str, list[str]] = {}
        links: dict[frozenset[str], float] = {}
        warm = max(1, int(self.photons * WARM_UP))
        seconds = max(warm / s.rate for s in self.scenario.sources)
        for sid, stream in state.streams.items():  # (parents before children)
            if stream.original:
                content[sid] = self.texts[stream.input.stream][:warm]
                continue
            parent = content[stream.parent]  # type: ignore[index]
            content[sid] = (run_operators(stream.operators, state.streams[stream.parent].kind, parent)  # type: ignore[index]
                            if stream.operators else parent)
            bits = 8 * sum(len(v.encode()) for v in content[sid]) / seconds
            for a, b in zip(stream.route, stream.route[1:]):
                links[frozenset((a, b))] = links.get(frozenset((a, b)), 0.0) + bits
        return links

    def _push(self, state: NetworkState, result: StrategyResult) -> None:
        content: dict[str, list[str]] = {}  # wire texts of every stream
        for sid, stream in state.streams.items():  # insertion order: parents before children
            if stream.original:
                content[sid] = self.texts[stream.input.stream]
                continue
            parent = content[stream.parent]  # type: ignore[index]
            start = time.perf_counter()
            values = parent
            if stream.operators:
                values = run_operators(stream.operators, state.streams[stream.parent].kind, parent)  # type: ignore[index]
            result.peer_cpu_s[stream.origin] = result.peer_cpu_s.get(stream.origin, 0.0) + \
                time.perf_counter() - start
            content[sid] = values
            if len(stream.route) > 1:
                start = time.perf_counter()
                total = sum(len(v.encode()) for v in values)
                spent = time.perf_counter() - start
                for peer in stream.route:
                    result.peer_cpu_s[peer] = result.peer_cpu_s.get(peer, 0.0) + spent
                for a, b in zip(stream.route, stream.route[1:]):
                    key = frozenset((a, b))
                    result.link_bytes[key] = result.link_bytes.get(key, 0) + total
        for qid, plan in result.plans.items():
            if not plan.admitted:
                continue
            analysis = self.analyses[qid]
            props = analysis.properties
            clauses = {b.name: b.clause for b in analysis.checked.clauses.values()
                       if b.kind != "aggregate"}
            start = time.perf_counter()
            delivered = {id(clauses[p.input_properties.variable]):
                         _values(content[p.result_stream], state.streams[p.result_stream].kind)
                         for p in plan.parts}
            items = list(post_process(analysis.checked, delivered, props.applied_upstream,
                                      props.aggregated_upstream).serialized_items())
            result.peer_cpu_s[plan.target] = result.peer_cpu_s.get(plan.target, 0.0) + \
                time.perf_counter() - start
            result.results[qid] = len(items)
            if self.verify:
                problem = compare_results(items, self.reference(qid))
                if problem is None:
                    result.verified += 1
                else:
                    result.mismatches.append(f"{qid}: {problem}")

    def reference(self, qid: str) -> list[str]:
        if qid not in self._reference:
            docs = {name: StreamDocument.from_text(doc) for name, doc in self.documents.items()}
            self._reference[qid] = list(evaluate(self.analyses[qid].checked, docs).serialized_items())
        return self._reference[qid]

    # ------------------------------------------------------------------ report

    def report(self, results: list[StrategyResult]) -> dict:
        duration = self.duration_s
        backbone = self.scenario.backbone
        out: dict = {
            "scenario": self.scenario.name,
            "description": self.scenario.description,
            "super_peers": len(backbone.peers),
            "links": len(backbone.links),
            "subscriptions": len(self.scenario.queries),
            "photons_per_stream": self.photons,
            "simulated_seconds": duration,
            "strategies": {},
        }
        for r in results:
            assert r.state is not None
            regs = r.registration_ms
            traffic, est_traffic = _per_peer(r.link_bytes), _per_peer(r.state.link_used)
            peers = {v: {"load_measured": r.peer_cpu_s.get(v, 0.0) / duration,
                         "load_estimate": r.state.peer_used.get(v, 0.0),
                         "load_capacity": backbone.peers[v].load_capacity,
                         "traffic_bytes": traffic.get(v, 0),
                         "traffic_estimate_bytes": round(est_traffic.get(v, 0.0) * duration / 8)}
                     for v in sorted(backbone.peers, key=peer_order)}
            links = {"–".join(sorted(e, key=peer_order)): {
                "bytes": r.link_bytes.get(e, 0),
                "estimate_bytes": round(r.state.link_used.get(e, 0.0) * duration / 8),
                "measured_model_bytes": round(r.measured_model.get(e, 0.0) * duration / 8),
                "bandwidth_bits_per_s": backbone.links[e].bandwidth,
            } for e in sorted(backbone.links, key=lambda e: sorted(e, key=peer_order))}
            rejected = [p for p in r.plans.values() if not p.admitted]
            out["strategies"][r.label] = {
                "registered": len(r.plans) - len(rejected),
                "rejected": len(rejected),
                "total_traffic_bytes": sum(r.link_bytes.values()),
                "total_traffic_estimate_bytes": round(sum(r.state.link_used.values()) * duration / 8),
                "model_accuracy": accuracy(links),
                "registration_ms": {
                    "min": round(min(regs), 3) if regs else 0.0,
                    "avg": round(pystats.fmean(regs), 3) if regs else 0.0,
                    "max": round(max(regs), 3) if regs else 0.0,
                    "median": round(pystats.median(regs), 3) if regs else 0.0,
                },
                "streams_in_network": sum(1 for s in r.state.streams.values() if not s.original),
                "verified": {"checked": r.verified + len(r.mismatches) if self.verify else 0,
                             "identical": r.verified, "mismatches": r.mismatches},
                "peers": peers,
                "links": links,
                "rejections": [{"subscription": p.subscription, "target": p.target,
                                "reason": p.reason} for p in rejected],
                "plans": {qid: p.to_json() for qid, p in r.plans.items()},
            }
            if r.subnets is not None:
                out["strategies"][r.label]["subnets"] = {**r.subnets.summary(), "relays": sum(
                    1 for s in r.state.streams.values() if is_relay(s, r.subnets))}
        flat, split = out["strategies"].get("sharing"), out["strategies"].get("sharing-subnets")
        if flat and split:  # (what planning subnet by subnet costs against planning the whole network)
            out["subnets_against_flat"] = {
                "traffic": _ratio(split["total_traffic_bytes"], flat["total_traffic_bytes"]),
                "traffic_model": _ratio(split["total_traffic_estimate_bytes"], flat["total_traffic_estimate_bytes"]),
                "registration_ms_median": {"flat": flat["registration_ms"]["median"],
                                           "subnets": split["registration_ms"]["median"]},
                "registered": {"flat": flat["registered"], "subnets": split["registered"]}}
        return out


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b else None


def _per_peer(per_link: dict[frozenset[str], float]) -> dict[str, float]:
    """What the links at each peer carry, summed (a link counts at both its ends)."""
    out: dict[str, float] = {}
    for link, amount in per_link.items():
        for v in link:
            out[v] = out.get(v, 0) + amount
    return out


def accuracy(links: dict[str, dict]) -> dict:
    """Per link that carries anything, measured bytes / model bytes: for the estimates and for
    the model learnt from the warm-up's measured rates where there is one (the distribution,
    and the share of links within ±25 %)."""
    def spread(key: str) -> dict:
        ratios = sorted(l["bytes"] / l[key] for l in links.values() if l["bytes"] and l.get(key))
        if not ratios:
            return {"links": 0}
        return {"links": len(ratios), "min": round(ratios[0], 3), "median": round(pystats.median(ratios), 3),
                "max": round(ratios[-1], 3),
                "within_25_percent": round(sum(0.75 <= x <= 1.25 for x in ratios) / len(ratios), 3)}
    return {"estimates": spread("estimate_bytes"), "measured_rates": spread("measured_model_bytes")}


def _values(texts: list[str], kind: str) -> list:
    """A delivered stream as post-processing reads it: items, or window records."""
    if kind == "records":
        return [WindowRecord.from_xml(t) for t in texts]
    return [etree.fromstring(t) for t in texts]


def compare_results(ours: list[str], reference: list[str]) -> str | None:
    """None when item-identical (numbers may differ in the last bits after merged partial sums)."""
    if len(ours) != len(reference):
        return f"{len(ours)} items delivered, the reference evaluator gives {len(reference)}"
    for i, (a, b) in enumerate(zip(ours, reference)):
        if a == b:
            continue
        try:
            ea, eb = etree.fromstring(a), etree.fromstring(b)
        except etree.XMLSyntaxError:
            return f"item {i} differs"
        ta, tb = list(ea.itertext()), list(eb.itertext())
        if ea.tag != eb.tag or len(ta) != len(tb):
            return f"item {i} differs: {a} vs {b}"
        for x, y in zip(ta, tb):
            try:
                if not math.isclose(float(x), float(y), rel_tol=1e-9):
                    return f"item {i} differs: {a} vs {b}"
            except ValueError:
                if x != y:
                    return f"item {i} differs: {a} vs {b}"
    return None


def simulate(scenario: Scenario, photons: int = 20000, strategies: list[Strategy] | None = None,
             verify: bool = True, progress: Callable[[str], None] | None = None,
             subnets: Subnets | None = None) -> dict:
    """``subnets``: sharing is also run subnet by subnet (``sharing-subnets``), and the report's
    ``subnets_against_flat`` says what that costs against sharing over the whole network."""
    sim = Simulation(scenario, photons, verify, progress)
    results = [sim.run(s) for s in (strategies or list(Strategy))]
    if subnets is not None:
        if Strategy.SHARING not in (strategies or list(Strategy)):
            results.insert(0, sim.run(Strategy.SHARING))  # (the flat optimum it is measured against)
        results.append(sim.run(Strategy.SHARING, subnets))
    return sim.report(results)
