"""Windows partitioned by a key (issue 36), through eight real super-peers in one process:
count and time windows per key, on an element and on an attribute, the key in results and in
conditions; a stream of per-key windows reused by a later subscription with the same key and a
coarser window (combined per key) and by one over all items (every key's windows merged), and
not by one partitioned differently.

Every subscriber gets what the reference evaluator gives over what was published after it
subscribed, in its order."""

from __future__ import annotations

import random

from superpeer_fakes import subscribed_at_once_and_exact

HEAD = 'for $w in stream("photons")/photons/photon'
CHIPS = ["I0", "I1", "I2", "S3", " I0"]  # (" I0" is a key of its own: keys compare as strings)


def photons(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for k in range(n):
        t += rng.expovariate(20)
        chip = rng.choice(CHIPS + [None])
        held = "" if chip is None else f"<chip>{chip}</chip>"
        out.append(f'<photon src="{rng.choice("ab")}">{held}<en>{rng.uniform(0.1, 3):.4f}</en>'
                   f'<det_time>{t:.4f}</det_time></photon>')
    return out


def test_time_windows_per_key_are_shared_with_a_coarser_window_on_the_same_key() -> None:
    fine = (f'<r>{{ {HEAD} |det_time diff 2 by chip| let $n := count($w/en) let $a := avg($w/en) '
            f'return <w>{{ $w/chip }}<n>{{ $n }}</n><a>{{ $a }}</a></w> }}</r>')
    coarse = (f'<r>{{ {HEAD} |det_time diff 4 step 2 by chip| let $s := sum($w/en) '
              f'where $w/chip != "S3" return <w>{{ $w/chip }}<s>{{ $s }}</s></w> }}</r>')
    other = (f'<r>{{ {HEAD} |det_time diff 4 step 2 by @src| let $s := sum($w/en) '
             f'return <w>{{ $w/@src }}{{ $s }}</w> }}</r>')
    everything = (f'<r>{{ {HEAD} |det_time diff 4| let $n := count($w/en) '
                  f'return <w>{{ $n }}</w> }}</r>')

    def check(records) -> None:
        first = records[0].plan.parts[0].result_stream
        assert records[1].plan.parts[0].reused == first, records[1].plan.describe()
        assert records[2].plan.parts[0].reused != first, records[2].plan.describe()
        assert records[3].plan.parts[0].reused == first, records[3].plan.describe()
        assert "by chip" in records[0].plan.describe()

    subscribed_at_once_and_exact(photons(3000), [("SP1", fine), ("SP7", coarse), ("SP6", other), ("SP5", everything)], check)


def test_count_windows_count_their_own_keys_items() -> None:
    tumbling = (f'<r>{{ {HEAD}[en > 0.5] |count 5 by chip| let $m := max($w/en) '
                f'where $m > 2 return <w>{{ $w/chip }}{{ $m }}</w> }}</r>')
    sliding = (f'<r>{{ {HEAD}[en > 0.5] |count 10 step 5 by chip| let $m := max($w/en) '
               f'return <w>{{ $w/chip }}{{ $m }}</w> }}</r>')
    local = f'<r>{{ {HEAD} |count 3 by chip| return <w>{{ $w/chip }}{{ count($w/en) }}{{ $w/en }}</w> }}</r>'
    subscribed_at_once_and_exact(photons(2000), [("SP1", tumbling), ("SP7", sliding), ("SP5", local)])


def test_windows_over_elements_below_the_items_count_those_elements() -> None:
    """``stream(…)/photons/photon/hit |count 3|``: the window's items are the hits (two in some
    photons), not the photons the network's operators see — it is cut at the subscriber, over
    the hits, its reference and key read below them."""
    rng = random.Random(5)
    items = []
    for k in range(600):
        hits = "".join(f"<hit><chip>{rng.choice('AB')}</chip><en>{rng.uniform(0, 3):.2f}</en><t>{k / 10:.1f}</t></hit>"
                       for _ in range(rng.choice([1, 2])))
        items.append(f"<photon>{hits}</photon>")
    head = 'for $w in stream("photons")/photons/photon/hit'
    subscribed_at_once_and_exact(items, [("SP1", f'<r>{{ {head} |count 3| return <n>{{ sum($w/en) }}</n> }}</r>'),
                ("SP7", f'<r>{{ {head} |t diff 2 by chip| return <w>{{ $w/chip }}{{ count($w/en) }}</w> }}</r>')])
