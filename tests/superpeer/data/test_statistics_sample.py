"""The sample a super-peer prices plans with stands for the whole stream, not for its first
items (found live: photons that began with a flare had every energy cut priced at up to twice
its selectivity for as long as the stream ran). Real data plane, real statistics, the snapshot
planners receive."""

from __future__ import annotations

from superpeer_fakes import in_process_network

from sharing.serialization import statistics_from_json, statistics_to_json

ITEMS, FIRST_HOT = 60_000, 2_000  # the stream's first items are "hot" (en 9), the rest are not


def test_the_sample_planners_get_stands_for_the_whole_stream_not_its_first_items() -> None:
    net = in_process_network()
    try:
        sp4 = net.peers["SP4"]
        sp4.control.register_stream("s", "s", "x", rate=100)
        texts = [f"<x><en>{9 if k < FIRST_HOT else 1}</en></x>" for k in range(ITEMS)]
        for k in range(0, ITEMS, 500):
            sp4.data.publish("s", texts[k:k + 500])
        stats = sp4.state.originals["s"].statistics
        assert stats.items < ITEMS // 4  # (observed: the first items, then one in 50)
        planned = statistics_from_json(statistics_to_json(stats))  # (what a planner receives)
        share = sum(v.get("en") == 9 for v in planned.sample) / len(planned.sample)
        assert share < 0.1, share  # 1/30 of the stream is hot (the sample sent was 77 % hot)
    finally:
        for p in net.peers.values():
            p.stop()
