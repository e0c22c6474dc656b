"""Where items came from in their original (DESIGN.md §12): batches keep it whole when a link
merges, splits or retries them."""

from __future__ import annotations

from superpeer.data.forwarding import Forwarder, LinkCounters
from superpeer.data.origins import joined, mergeable, of_batch


def test_runs_join_into_a_range_or_a_list_and_unknown_stays_unknown():
    assert joined([range(0, 3), range(3, 5)]) == range(0, 5)
    assert joined([range(0, 3), range(4, 5)]) == [0, 1, 2, 4]
    assert joined([[1, 5], [9]]) == [1, 5, 9]
    assert joined([range(0, 2), None]) is None
    assert mergeable(range(0, 2), range(2, 4)) and not mergeable(range(0, 2), range(3, 4))
    assert not mergeable(range(0, 2), [2, 3]) and not mergeable(None, [1])
    assert of_batch(True, [], 7, 3) == range(7, 10)
    assert of_batch(False, [4, 8], 0, 2) == [4, 8] and of_batch(False, [4], 0, 2) is None


def test_a_link_merges_and_splits_batches_with_their_origins():
    link = Forwarder("A", "B", stub=None, counters=LinkCounters())
    for k in range(5):  # a per-item stream: explicit origins, numbered by the link
        link.send("s", [f"<i>{k}</i>"] * 2, origins=[10 * k, 10 * k + 3])
    link.send("c", ["<i/>"] * 3, position=0, origins=range(0, 3))  # a copy: its numbers
    link.send("c", ["<i/>"] * 2, position=3, origins=range(3, 5))
    first = link._take()
    assert first.stream == "s" and first.origins == [0, 3, 10, 13, 20, 23, 30, 33, 40, 43]
    second = link._take()
    assert second.stream == "c" and second.origins == range(0, 5) and second.position == 0
    split = second.split(2)
    assert second.origins == range(0, 2) and split.origins == range(2, 5) and split.position == 2
