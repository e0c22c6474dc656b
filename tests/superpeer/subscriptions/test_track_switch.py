"""The switch between an old and a new plan's stream (DESIGN.md §12): whatever the order in
which the two plans' items arrive, the input sees every item once, in the original's order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from superpeer.data.origins import fed_high
from superpeer.subscriptions.track_switch import TrackSwitch


class Input:
    """What the switch feeds: the subscription's input, as a list."""

    def __init__(self) -> None:
        self.items: list[int] = []
        self.origins: list[int | None] = []  # (what a re-plan after a failure resumes after)
        self.ends = 0

    def feed(self, variable: str, values: list, end: bool, origins=None) -> None:
        self.items.extend(values)
        self.origins.extend(origins if origins is not None else [None] * len(values))
        self.ends += end


def switch() -> tuple[TrackSwitch, Input]:
    got = Input()
    return TrackSwitch(got, "p", "old", "new"), got  # type: ignore[arg-type]


def batches(origins: list[int], cuts: list[int]) -> list[list[int]]:
    out, at = [], 0
    for c in sorted(set(cuts)):
        if at < c < len(origins):
            out.append(origins[at:c])
            at = c
    out.append(origins[at:])
    return [b for b in out if b]


@settings(max_examples=300, deadline=None)
@given(st.sets(st.integers(0, 300), max_size=120), st.integers(0, 300), st.lists(st.integers(0, 120)),
       st.lists(st.integers(0, 120)), st.lists(st.booleans(), max_size=80), st.booleans())
def test_every_item_once_in_order_whatever_the_interleaving(selected, attach, old_cuts, new_cuts, order, ended):
    """The subscription's items are ``selected`` (origins); the old plan delivers all of them,
    the new one those from ``attach`` on; batches of both arrive interleaved as ``order`` says."""
    items = sorted(selected)
    s, got = switch()
    old = batches(items, old_cuts)
    new = batches([o for o in items if o >= attach], new_cuts)
    turns = iter(order)
    if ended and not old:
        old = [[]]
    while old or new:
        take_old = bool(old) and (not new or next(turns, True))
        if take_old:
            b = old.pop(0)
            s.old.feed("p", b, end=ended and not old, origins=b)
        else:
            b = new.pop(0)
            s.new.feed("p", b, end=ended and not new, origins=b)
    if not s.done:  # a sparse old plan: this peer saw the original pass everything
        s.progress(301)
    assert got.items == items
    assert got.origins == items  # (each item's origin goes with it: here an item is its origin)
    assert got.ends == (1 if ended else 0)
    # (until the new plan delivers an item, the switch item is not known: both plans run)
    assert s.done or s.at is None


@settings(max_examples=300, deadline=None)
@given(st.sets(st.integers(0, 300), min_size=1, max_size=120), st.integers(0, 300), st.integers(0, 120),
       st.lists(st.integers(0, 120)), st.lists(st.booleans(), max_size=80))
def test_what_the_old_plan_fed_before_the_switch_is_not_taken_again(selected, attach, fed, cuts, order):
    """The old plan's stream fed the input straight for a while (its first ``fed`` items, what
    ``PeerState.fed_high`` records) before the switch was put in front of it; the new plan reuses
    a stream that reaches this peer later, so its first item may be one the input has already —
    as seen live, when one subscription moved onto a stream another one's plan made."""
    items = sorted(selected)
    fed = min(fed, len(items))
    s, got = switch()
    got.feed("p", items[:fed], False)
    s.fed_before(fed_high(None, items[:fed], items[:fed]))
    old = batches(items[fed:], cuts)
    new = batches([o for o in items if o >= attach], cuts[::-1])
    turns = iter(order)
    while old or new:
        if bool(old) and (not new or next(turns, True)):
            b = old.pop(0)
            s.old.feed("p", b, end=False, origins=b)
        else:
            b = new.pop(0)
            s.new.feed("p", b, end=False, origins=b)
    if not s.done:
        s.progress(301)
    assert got.items == items


def test_the_latest_fed_origin_and_window_index_are_kept_per_stream():
    class Record:
        def __init__(self, index: int) -> None:
            self.index = index

    assert fed_high(None, ["a", "b"], range(4, 6)) == (5, -1)
    assert fed_high((9, -1), ["c"], [7]) == (9, -1)  # (never back)
    assert fed_high(None, [Record(3), Record(2)], None) == (-1, 3)
    assert fed_high((4, 1), [], None) == (4, 1)


def test_the_switch_waits_for_the_old_plan_then_feeds_what_it_held():
    s, got = switch()
    s.old.feed("p", [1, 2], False, [1, 2])
    s.new.feed("p", [5, 7], False, [5, 7])  # the new plan starts at item 5 of the original
    assert s.at == 5 and got.items == [1, 2] and not s.done
    s.old.feed("p", [4, 5], False, [4, 5])  # 5 is the new plan's: the old one is complete
    assert s.done and got.items == [1, 2, 4, 5, 7]
    s.old.feed("p", [7], False, [7])  # the old plan's later items are dropped
    s.new.feed("p", [9], True, [9])
    assert got.items == [1, 2, 4, 5, 7, 9] and got.ends == 1


def test_a_new_plan_that_started_behind_the_old_one_skips_what_the_old_one_fed():
    s, got = switch()
    s.old.feed("p", [1, 3, 8], False, [1, 3, 8])
    s.new.feed("p", [3, 8, 9], False, [3, 8, 9])
    assert s.at == 9
    s.progress(9)
    assert got.items == [1, 3, 8, 9]


def test_items_without_origins_give_the_switch_up_and_the_old_plan_goes_on():
    s, got = switch()
    s.old.feed("p", ["a"], False, [1])
    s.new.feed("p", ["b"], False, None)
    assert s.failed and s.done
    s.old.feed("p", ["c"], True, [2])
    assert got.items == ["a", "c"] and got.ends == 1
