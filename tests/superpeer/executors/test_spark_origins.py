"""Where the Spark executor's feed items came from (``spark.origins``): an output's origin is
its input's, found by feed offset; unknown (never wrong) where the push did not say, and
forgotten once the feed has committed past it. With real Spark, a per-item chain's outputs
reach the node with the origins of the items they came from."""

from __future__ import annotations

import time

import pytest

from superpeer.executors.spark.origins import FeedOrigins


def test_an_output_has_its_input_items_origin_until_the_feed_commits_past_it() -> None:
    origins = FeedOrigins()
    origins.add(0, [10, 11, 12])
    origins.add(5, [40, 41])  # (offsets 3 and 4: items of another stream, or an end, without origins)
    assert origins.of([0, 2, 5, 6]) == [10, 12, 40, 41]
    assert origins.of([2, 3]) is None and origins.of([7]) is None
    origins.trim(3)
    assert len(origins) == 1 and origins.of([0]) is None and origins.of([6]) == [41]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_per_item_chain_on_spark_hands_on_the_origins_of_its_outputs(tmp_path) -> None:
    from superpeer.executors.spark.executor import SparkExecutor
    from wxquery.operators import definitions as alg

    got: list[tuple[list, list | None]] = []
    ex = SparkExecutor("origins", checkpoint_dir=tmp_path / "ckpt", trigger_ms=50,
                       deliver=lambda stream, seq, texts, end, origins=None: got.append((texts, origins)))
    ex.start()
    try:
        ex.install("odd", (alg.Select((alg.Atom("n", ">", None, 0),)),), parent="p")
        items = [f"<i><n>{k % 3 - 1}</n></i>" for k in range(30)]
        def outputs(n: int) -> None:
            deadline = time.monotonic() + 240
            while sum(len(t) for t, _ in got) < n:
                assert time.monotonic() < deadline, got
                time.sleep(0.05)

        ex.push("p", [], items[:12], False, origins=range(100, 112))
        outputs(4)
        ex.push("p", [], items[12:], True)  # (no origins said: none handed on)
        outputs(10)
        assert [o for _, origins in got if origins for o in origins] == [102, 105, 108, 111]
        assert [len(t) for t, o in got if o is None and t] == [6]
    finally:
        ex.stop()
