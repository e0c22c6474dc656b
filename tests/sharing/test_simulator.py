"""The simulator end to end: the paper's scenarios with all three strategies."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sharing.planner import Strategy
from sharing.scenarios import SCENARIOS, random_scenario
from sharing.simulator import Simulation, simulate

from conftest import ROOT  # the checkout


@pytest.mark.slow
def test_paper_example_all_results_verified():
    report = simulate(SCENARIOS["paper-example"](1), photons=800)
    s = report["strategies"]
    assert set(s) == {"sharing", "data-shipping", "query-shipping"}
    for name, d in s.items():
        assert d["verified"]["checked"] == d["registered"] == 25, name
        assert d["verified"]["mismatches"] == [], d["verified"]["mismatches"]
        assert set(d["registration_ms"]) == {"min", "avg", "max", "median"}
    assert s["sharing"]["total_traffic_bytes"] < s["query-shipping"]["total_traffic_bytes"] \
        < s["data-shipping"]["total_traffic_bytes"]


def test_constrained_grid_rejections():
    """Planning only (no photons pushed): sharing rejects at most 2, the baselines many more."""
    sim = Simulation(SCENARIOS["paper-grid-constrained"](1), photons=10, verify=False)
    rejected = {}
    for strategy in Strategy:
        result = sim.run(strategy)
        rejected[strategy] = sum(not p.admitted for p in result.plans.values())
    assert rejected[Strategy.SHARING] <= 2
    assert rejected[Strategy.DATA_SHIPPING] >= 20 and rejected[Strategy.QUERY_SHIPPING] >= 20


@pytest.mark.slow
def test_cli_writes_report_and_plots(tmp_path):
    out = tmp_path / "sim"
    r = subprocess.run([sys.executable, "-m", "thinpeer.cli", "simulate", "random", "--peers", "12",
                        "--queries", "15", "--seed", "4", "--photons", "400", "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    report = json.loads((out / "report.json").read_text())
    for name in ("sharing", "data-shipping", "query-shipping"):
        d = report["strategies"][name]
        assert {"registered", "rejected", "total_traffic_bytes", "registration_ms"} <= set(d)
        assert d["verified"]["mismatches"] == []
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert len(pngs) == 2 and all((out / p).stat().st_size > 10_000 for p in pngs)
    assert "sharing" in r.stdout


def test_random_scenarios_are_seeded():
    a, b = random_scenario(20, 10, 3), random_scenario(20, 10, 3)
    assert [q.text for q in a.queries] == [q.text for q in b.queries]
    assert sorted(map(sorted, a.backbone.links)) == sorted(map(sorted, b.backbone.links))
