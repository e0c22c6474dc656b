"""The bandwidth/load cost model C(P) of the paper (§3.2) and admission control (DESIGN.md §5).

    C(P) = γ · Σ_e [u_b(e) + max(0, u_b(e) − a_b(e)) · exp(u_b(e) − a_b(e))]
         + (1 − γ) · Σ_v [u_l(v) + max(0, u_l(v) − a_l(v)) · exp(u_l(v) − a_l(v))]

``u_b(e)``: bandwidth the plan adds to link e relative to b(e); ``u_l(v)``: load the plan adds to
peer v relative to l(v); ``a_b``, ``a_l``: what is still available, relatively. Loads are in cores
(CPU-seconds per second): an operator costs its calibrated base load (seconds per input item,
measured on this machine by ``benchmarks/calibrate_operators.py``) × pindex(v) × input frequency.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from importlib import resources

from wxquery.operators import definitions as alg

CALIBRATION_FILE = "calibration.json"


@dataclass(frozen=True)
class Calibration:
    """Base loads in seconds per input item (``select`` per atom on top of ``select_base``)."""

    select_base: float
    select_atom: float
    project: float
    window_aggregate: float
    combine: float
    aggregate_filter: float
    forward: float
    post_process: float
    measured_on: str = ""

    @classmethod
    def load(cls) -> "Calibration":
        """The shipped calibration (read once: every plan a super-peer makes prices with it)."""
        return _shipped()

    def operator(self, op: alg.Operator) -> float:
        if isinstance(op, alg.Sample):  # a hash and a comparison per item
            return self.select_base + self.select_atom
        if isinstance(op, alg.Select):
            return self.select_base + self.select_atom * len(op.atoms)
        if isinstance(op, alg.Project):
            return self.project
        if isinstance(op, alg.WindowAggregate):
            return self.window_aggregate
        if isinstance(op, alg.CombineWindows):
            return self.combine
        if isinstance(op, alg.AggregateFilter):
            return self.aggregate_filter
        if isinstance(op, alg.BandJoin):  # (per item of either input: about what post-processing takes)
            return self.post_process
        raise TypeError(op)


@functools.cache
def _shipped() -> Calibration:
    data = json.loads(resources.files("sharing").joinpath(CALIBRATION_FILE).read_text())
    return Calibration(**{k: data[k] for k in Calibration.__dataclass_fields__ if k in data})


@dataclass
class Usage:
    """Resources a plan (or an installed stream) takes: bits/s per link, cores per peer."""

    links: dict[frozenset[str], float] = field(default_factory=dict)
    peers: dict[str, float] = field(default_factory=dict)

    def add_link(self, a: str, b: str, bits: float) -> None:
        key = frozenset((a, b))
        self.links[key] = self.links.get(key, 0.0) + bits

    def add_peer(self, v: str, cores: float) -> None:
        self.peers[v] = self.peers.get(v, 0.0) + cores

    def merge(self, other: "Usage") -> "Usage":
        out = Usage(dict(self.links), dict(self.peers))
        for k, v in other.links.items():
            out.links[k] = out.links.get(k, 0.0) + v
        for k, v in other.peers.items():
            out.peers[k] = out.peers.get(k, 0.0) + v
        return out


@dataclass(frozen=True)
class Overload:
    kind: str  # "link" or "peer"
    name: str
    needed: float  # relative to capacity
    available: float

    def __str__(self) -> str:
        return (f"{self.kind} {self.name} would need {self.needed:.1%} of its capacity but has "
                f"{self.available:.1%} left")


@dataclass(frozen=True)
class CostModel:
    gamma: float = 0.5

    def cost(self, plan: Usage, bandwidth: dict[frozenset[str], float],
             link_used: dict[frozenset[str], float], capacity: dict[str, float],
             peer_used: dict[str, float]) -> tuple[float, list[Overload]]:
        """C(P) and the overloads the plan would cause (empty when it fits)."""
        overloads: list[Overload] = []
        link_term = _term("link", plan.links, bandwidth, link_used, overloads,
                          lambda e: "–".join(sorted(e)))
        peer_term = _term("peer", plan.peers, capacity, peer_used, overloads, str)
        return self.gamma * link_term + (1 - self.gamma) * peer_term, overloads


def _term(kind: str, added: dict, capacity: dict, used: dict, overloads: list[Overload],
          name) -> float:
    """Σ [u + max(0, u − a) · e^(u − a)] over the resources a plan adds to (links or peers)."""
    total = 0.0
    for key, amount in added.items():
        cap = capacity[key]
        u = amount / cap
        a = max(0.0, 1.0 - used.get(key, 0.0) / cap)
        total += u + max(0.0, u - a) * math.exp(min(u - a, 50.0))
        if u > a:
            overloads.append(Overload(kind, name(key), u, a))
    return total
