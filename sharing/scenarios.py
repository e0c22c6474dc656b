"""Built-in simulation scenarios shaped like the paper's evaluation (§4).

Queries come from selection, projection and aggregation templates whose constants are drawn
uniformly from predefined sets, so that a realistic share of them can reuse each other's streams,
as in the paper. Everything is seeded: the same scenario gives the same workload.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable

import networkx as nx

from .backbone import Backbone, Link, Peer

# The paper's Queries 1–4 ship as package data, so scenarios (and the demo, which registers the
# same queries) work from an installed package, not only from a source checkout.
EXAMPLE_QUERIES: Traversable = resources.files(__package__) / "data" / "queries"

# Sky regions (ra_min, ra_max, dec_min, dec_max) around the Vela field, nested on purpose.
REGIONS = [
    ("120.0", "138.0", "-49.0", "-40.0"),  # Vela SNR (Query 1)
    ("130.5", "135.5", "-48.0", "-45.0"),  # RX J0852.0-4622 (Query 2)
    ("125.0", "135.0", "-48.0", "-42.0"),
    ("128.0", "136.0", "-47.5", "-44.5"),
]
ENERGY_CUTS = [None, "1.0", "1.3"]
PROJECTIONS = [
    ["coord/cel/ra", "coord/cel/dec", "phc", "en", "det_time"],
    ["coord/cel/ra", "coord/cel/dec", "en", "det_time"],
    ["en", "det_time"],
    ["coord/cel/ra", "coord/cel/dec"],
]
WINDOWS = [("20", "10"), ("60", "40"), ("40", "20"), ("20", "20")]
AGGREGATES = ["avg", "max", "count"]


@dataclass(frozen=True)
class SourceSpec:
    """An original stream: registered at ``peer``, photons generated with ``seed`` at ``rate``
    items per second."""

    name: str
    peer: str
    seed: int
    rate: float


@dataclass(frozen=True)
class QuerySpec:
    id: str
    text: str
    peer: str
    template: str


@dataclass
class Scenario:
    name: str
    backbone: Backbone
    sources: list[SourceSpec]
    queries: list[QuerySpec] = field(default_factory=list)
    description: str = ""


# ----------------------------------------------------------------------------- templates


def selection_query(rng: random.Random, stream: str, narrow_projection: bool = False) -> str:
    ra0, ra1, dec0, dec1 = rng.choice(REGIONS)
    cut = rng.choice(ENERGY_CUTS)
    conds = [f"$p/coord/cel/ra >= {ra0}", f"$p/coord/cel/ra <= {ra1}",
             f"$p/coord/cel/dec >= {dec0}", f"$p/coord/cel/dec <= {dec1}"]
    if cut is not None:
        conds.insert(0, f"$p/en >= {cut}")
    outs = rng.choice(PROJECTIONS[2:] if narrow_projection else PROJECTIONS[:2])
    body = " ".join(f"{{ $p/{o} }}" for o in outs)
    return (f'<photons>{{ for $p in stream("{stream}")/photons/photon\n'
            f"  where {' and '.join(conds)}\n  return <ph>{body}</ph> }}</photons>")


def aggregation_query(rng: random.Random, stream: str) -> str:
    ra0, ra1, dec0, dec1 = rng.choice(REGIONS[:3])  # pre-window selections are shared only if equal
    size, step = rng.choice(WINDOWS)
    fn = rng.choice(AGGREGATES)
    arg = "$w" if fn == "count" else "$w/en"
    filt = f"\n  where $a >= {rng.choice(['0.8', '1.0', '1.3'])}" if fn == "avg" and rng.random() < 0.3 else ""
    return (f'<photons>{{ for $w in stream("{stream}")/photons/photon\n'
            f"  [coord/cel/ra >= {ra0} and coord/cel/ra <= {ra1} and coord/cel/dec >= {dec0} "
            f"and coord/cel/dec <= {dec1}]\n  |det_time diff {size} step {step}|\n"
            f"  let $a := {fn}({arg}){filt}\n  return <{fn}_en>{{ $a }}</{fn}_en> }}</photons>")


def template_queries(rng: random.Random, streams: list[str], peers: list[str], n: int,
                     start: int = 1) -> list[QuerySpec]:
    out = []
    for i in range(n):
        stream = rng.choice(streams)
        kind = rng.choices(["selection", "projection", "aggregation"], weights=[4, 3, 3])[0]
        if kind == "aggregation":
            text = aggregation_query(rng, stream)
        else:
            text = selection_query(rng, stream, narrow_projection=kind == "projection")
        out.append(QuerySpec(f"q{start + i}", text, rng.choice(peers), kind))
    return out


def example_queries() -> list[str]:
    """Names of the shipped example queries (``q1`` … ``q4``), in order."""
    return sorted(p.name.removesuffix(".wxq") for p in EXAMPLE_QUERIES.iterdir()
                  if p.name.endswith(".wxq"))


def example_query(name: str) -> str:
    """The text of a shipped example query, e.g. ``example_query("q1")``."""
    resource = EXAMPLE_QUERIES / f"{name}.wxq"
    if not resource.is_file():
        raise KeyError(f"no shipped example query {name!r}; there are {', '.join(example_queries())}")
    return resource.read_text(encoding="utf-8")


def paper_query(n: int, stream: str = "photons") -> str:
    """The paper's Query ``n`` reading ``stream`` instead of ``photons``."""
    return example_query(f"q{n}").replace('stream("photons")', f'stream("{stream}")')


# ----------------------------------------------------------------------------- topologies


PAPER_EXAMPLE_LINKS = [("SP0", "SP1"), ("SP0", "SP2"), ("SP1", "SP5"), ("SP2", "SP3"),
                       ("SP3", "SP4"), ("SP4", "SP5"), ("SP5", "SP6"), ("SP5", "SP7"),
                       ("SP6", "SP7"), ("SP2", "SP6")]
# Photons per second of the simulated telescopes. With the calibrated operator costs of this
# machine, this rate makes the constrained grid (10 % of a core per peer, 1 Mbit/s links) tight
# enough that strategies differ, as in the paper.
PHOTON_RATE = 150.0


def paper_example_backbone(bandwidth: float = 100e6, load_capacity: float = 1.0) -> Backbone:
    peers = [Peer(f"SP{i}", load_capacity) for i in range(8)]
    return Backbone(peers, [Link(a, b, bandwidth) for a, b in PAPER_EXAMPLE_LINKS])


def grid_backbone(n: int = 4, bandwidth: float = 100e6, load_capacity: float = 1.0) -> Backbone:
    peers = [Peer(f"SP{i}", load_capacity) for i in range(n * n)]
    links = []
    for r in range(n):
        for c in range(n):
            i = r * n + c
            if c + 1 < n:
                links.append(Link(f"SP{i}", f"SP{i + 1}", bandwidth))
            if r + 1 < n:
                links.append(Link(f"SP{i}", f"SP{i + n}", bandwidth))
    return Backbone(peers, links)


def random_backbone(n: int, seed: int, bandwidth: float = 100e6, load_capacity: float = 1.0) -> Backbone:
    g = nx.connected_watts_strogatz_graph(n, k=min(4, n - 1) if n > 2 else 1, p=0.2, seed=seed) \
        if n > 3 else nx.path_graph(n)
    peers = [Peer(f"SP{i}", load_capacity) for i in range(n)]
    return Backbone(peers, [Link(f"SP{a}", f"SP{b}", bandwidth) for a, b in g.edges()])


# ----------------------------------------------------------------------------- scenarios


def paper_example(seed: int = 1) -> Scenario:
    rng = random.Random(seed)
    backbone = paper_example_backbone()
    peers = sorted(backbone.peers)
    queries = [QuerySpec("q1", paper_query(1), "SP1", "selection"),
               QuerySpec("q2", paper_query(2), "SP7", "selection"),
               QuerySpec("q3", paper_query(3), "SP0", "aggregation"),
               QuerySpec("q4", paper_query(4), "SP6", "aggregation")]
    queries += template_queries(rng, ["photons"], peers, 21, start=5)
    return Scenario("paper-example", backbone, [SourceSpec("photons", "SP4", 1, PHOTON_RATE)],
                    queries, "8 super-peers (paper Figures 1–2), photons at SP4, 25 queries")


def paper_grid(seed: int = 1, constrained: bool = False) -> Scenario:
    rng = random.Random(seed)
    bandwidth = 1e6 if constrained else 100e6
    capacity = 0.1 if constrained else 1.0
    backbone = grid_backbone(4, bandwidth, capacity)
    peers = sorted(backbone.peers, key=lambda p: int(p[2:]))
    sources = [SourceSpec("photons", "SP5", 1, PHOTON_RATE), SourceSpec("photons2", "SP10", 2, PHOTON_RATE)]
    queries = template_queries(rng, [s.name for s in sources], peers, 100)
    name = "paper-grid-constrained" if constrained else "paper-grid"
    desc = "4×4 grid, 16 super-peers, 2 streams, 100 queries"
    if constrained:
        desc += "; peer load capped at 10 %, links at 1 Mbit/s"
    return Scenario(name, backbone, sources, queries, desc)


def random_scenario(peers: int, queries: int, seed: int) -> Scenario:
    rng = random.Random(seed)
    backbone = random_backbone(peers, seed)
    names = sorted(backbone.peers, key=lambda p: int(p[2:]))
    sources = [SourceSpec("photons", rng.choice(names), seed, PHOTON_RATE),
               SourceSpec("photons2", rng.choice(names), seed + 1, PHOTON_RATE)]
    return Scenario(f"random-{peers}-{queries}-{seed}", backbone, sources,
                    template_queries(rng, [s.name for s in sources], names, queries),
                    f"random small-world network, {peers} super-peers, {queries} queries")


SCENARIOS = {
    "paper-example": lambda seed: paper_example(seed),
    "paper-grid": lambda seed: paper_grid(seed),
    "paper-grid-constrained": lambda seed: paper_grid(seed, constrained=True),
}
