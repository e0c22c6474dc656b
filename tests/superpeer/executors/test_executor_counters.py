"""Both executors, driven through the executor interface, give the per-item oracle's outputs and
count the same late and missing-reference items per window chain (what ``status`` reports)."""

from __future__ import annotations

import pytest
from lxml import etree

from executor_harness import TestingSource, run_executor
from per_item_operators import Pipeline, serialize
from superpeer.executors import make_executor
from operator_cases import CHAINS, assert_same, photons

WINDOW_CHAINS = ["time-tumbling", "time-sliding", "count"]
LATENESS = 2.0


def expected(name: str, texts: list[str]) -> tuple[list[str], tuple[int, int]]:
    pipeline = Pipeline(CHAINS[name], lateness=LATENESS)
    out = [serialize(v) for v in pipeline.run(etree.fromstring(t) for t in texts)]
    return out, (pipeline.stats.late_items, pipeline.stats.missing_reference)


def check(factory, texts: list[str], source: TestingSource) -> None:
    chains = {name: tuple(CHAINS[name]) for name in WINDOW_CHAINS + ["select-project"]}
    run = run_executor(factory, chains, source, timeout=300)
    for name in chains:
        want, (late, missing) = expected(name, texts)
        assert_same(want, run.sink.items(name))
        if name in WINDOW_CHAINS:
            counters = run.counters[name]
            assert (counters.late_items, counters.missing_reference) == (late, missing), name
    late_somewhere = sum(c.late_items + c.missing_reference for c in run.counters.values())
    assert late_somewhere > 0  # the messy input does exercise the counters
    assert "select-project" not in run.counters  # no window: nothing to count


def test_inline_executor_counts_what_it_drops() -> None:
    texts = photons(3000, seed=11, messy=True)
    check(lambda deliver: make_executor("inline", "p", deliver, lateness=LATENESS),
          texts, TestingSource.of("photons", texts, 250))


@pytest.mark.slow
def test_spark_executor_counts_what_it_drops_across_a_restart(tmp_path) -> None:
    texts = photons(3000, seed=11, messy=True)
    check(lambda deliver: make_executor("spark", "p", deliver, lateness=LATENESS, checkpoint_dir=str(tmp_path),
                                        trigger_ms=50),
          texts, TestingSource.of("photons", texts, 250, abort_after=5))
