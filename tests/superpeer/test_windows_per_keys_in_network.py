"""Windows partitioned by several keys (issue 36), through eight real super-peers in one
process: a stream of windows per (chip, @src) reused by later subscriptions per the same keys
in the other order (its records' keys reordered, results in the later query's order), and for
time windows per fewer keys (the finer keys' windows merged), but count windows not across key
sets (they hold other items); a window per keys cut at the subscriber, over the items.

Every subscriber gets what the reference evaluator gives over what was published after it
subscribed, in its order."""

from __future__ import annotations

import random

from superpeer_fakes import subscribed_at_once_and_exact

HEAD = 'for $w in stream("photons")/photons/photon'
CHIPS = ["I0", "I1", "S3", " I0"]  # (" I0" is a key of its own: keys compare as strings)


def photons(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for _ in range(n):
        t += rng.expovariate(20)
        chip = rng.choice(CHIPS + [None])
        held = "" if chip is None else f"<chip>{chip}</chip>"
        src = rng.choice(["a", "b", None])
        said = "" if src is None else f' src="{src}"'
        out.append(f'<photon{said}>{held}<en>{rng.uniform(0.1, 3):.4f}</en>'
                   f'<det_time>{t:.4f}</det_time></photon>')
    return out


def test_time_windows_per_two_keys_serve_the_keys_reordered_and_fewer_keys() -> None:
    fine = (f'<r>{{ {HEAD} |det_time diff 5 by chip, @src| let $n := count($w/en) let $a := avg($w/en) '
            f'return <w>{{ $w/@src }}{{ $w/chip }}<n>{{ $n }}</n><a>{{ $a }}</a></w> }}</r>')
    reordered = (f'<r>{{ {HEAD} |det_time diff 10 step 5 by @src, chip| let $s := sum($w/en) '
                 f'where $w/chip != "S3" return <w>{{ $w/@src }}{{ $w/chip }}<s>{{ $s }}</s></w> }}</r>')
    fewer = (f'<r>{{ {HEAD} |det_time diff 10 by chip| let $n := count($w/en) let $m := avg($w/en) '
             f'return <w>{{ $w/chip }}<n>{{ $n }}</n><m>{{ $m }}</m></w> }}</r>')
    other = (f'<r>{{ {HEAD} |det_time diff 10 by chip, en| let $n := count($w/en) '
             f'return <w>{{ $w/chip }}{{ $n }}</w> }}</r>')

    def check(records) -> None:
        first = records[0].plan.parts[0].result_stream
        assert "by chip, @src" in records[0].plan.describe()
        assert records[1].plan.parts[0].reused == first, records[1].plan.describe()
        assert records[2].plan.parts[0].reused == first, records[2].plan.describe()
        assert records[3].plan.parts[0].reused != first, records[3].plan.describe()

    subscribed_at_once_and_exact(photons(2500), [("SP1", fine), ("SP7", reordered), ("SP5", fewer), ("SP6", other)], check)


def test_count_windows_per_two_keys_serve_the_same_keys_only() -> None:
    fine = (f'<r>{{ {HEAD}[en > 0.5] |count 3 by chip, @src| let $m := max($w/en) '
            f'return <w>{{ $w/@src }}{{ $w/chip }}{{ $m }}</w> }}</r>')
    reordered = (f'<r>{{ {HEAD}[en > 0.5] |count 6 step 3 by @src, chip| let $m := max($w/en) '
                 f'return <w>{{ $w/@src }}{{ $w/chip }}{{ $m }}</w> }}</r>')
    fewer = (f'<r>{{ {HEAD}[en > 0.5] |count 3 by chip| let $m := max($w/en) '
             f'return <w>{{ $w/chip }}{{ $m }}</w> }}</r>')

    local = (f'<r>{{ {HEAD} |count 2 by @src, chip| '
             f'return <w>{{ $w/@src }}{{ $w/chip }}{{ $w/en }}</w> }}</r>')  # (cut at the subscriber, over the items)

    def check(records) -> None:
        first = records[0].plan.parts[0].result_stream
        assert records[1].plan.parts[0].reused == first, records[1].plan.describe()
        assert records[2].plan.parts[0].reused != first, records[2].plan.describe()

    subscribed_at_once_and_exact(photons(1500), [("SP1", fine), ("SP7", reordered), ("SP5", fewer), ("SP6", local)], check)
