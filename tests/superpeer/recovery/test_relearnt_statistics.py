"""A restarted super-peer learns its streams' statistics again from their logs: plans made
before new items arrive are priced with the stream as it was (rate, sizes, which elements occur
once per item), not as an empty stream at one item per second whose every element may repeat."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

from superpeer.history.state_store import StateStore
from superpeer.peer_state import OriginalState
from superpeer.recovery.restore import relearn_statistics


def _logged(tmp_path: Path, batches: list[tuple[list[str], float]]) -> StateStore:
    store = StateStore(tmp_path / "state")
    store.add_original("vs", "vs", "v", 0.0, registered_at=batches[0][1])
    n = 0
    for texts, at in batches:
        store.append("vs", n, texts, n + len(texts), n + len(texts), 0, 0, at=at)
        n += len(texts)
    return store


def test_statistics_and_rate_come_back_from_the_log(tmp_path: Path) -> None:
    now = time.time()
    items = [f'<v id="{k}"><a>{k}</a><b>1</b>{"<b>2</b>" if k % 3 == 0 else ""}</v>' for k in range(600)]
    store = _logged(tmp_path, [(items[k:k + 100], now - 60 + 10 * (k // 100)) for k in range(0, 600, 100)])
    store.close()
    store = StateStore(tmp_path / "state")  # (as a restarted process opens it)
    original = OriginalState("vs", "vs", "v", accepted=600)
    relearn_statistics(SimpleNamespace(store=store), original)
    stats = original.statistics
    assert stats.items == 600
    assert stats.single_elements == {"a", "@id"} and "b" in stats.repeated_elements
    assert abs(stats.frequency - 600 / 50) < 0.01  # (the batches arrived over 50 s)
    assert 0 < time.monotonic() - original.first_arrival < 600 / stats.frequency + 1


def test_a_declared_rate_stays_and_only_the_newest_items_are_read(tmp_path: Path) -> None:
    items = [f"<v><a>{k}</a></v>" for k in range(5000)]
    store = _logged(tmp_path, [(items, time.time())])
    original = OriginalState("vs", "vs", "v", accepted=5000, rate=40.0)
    original.statistics.frequency = 40.0
    relearn_statistics(SimpleNamespace(store=store), original)
    assert original.statistics.items == 2000 and original.statistics.frequency == 40.0


def test_only_the_newest_megabyte_is_observed_again(tmp_path: Path) -> None:
    big = "x" * 20_000
    items = [f"<v><a>{k}</a><t>{big}</t></v>" for k in range(300)]
    store = _logged(tmp_path, [(items[k:k + 30], time.time()) for k in range(0, 300, 30)])
    original = OriginalState("vs", "vs", "v", accepted=300)
    relearn_statistics(SimpleNamespace(store=store), original)
    assert 40 <= original.statistics.items <= 53  # (about 1 MiB of 20 kB items: the newest)
    assert original.statistics.increments["a"].last == 299.0
