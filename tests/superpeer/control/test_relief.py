"""Whether a coarser sample relieves a pressured link (``adaptive_sampling.relieved``): its plan
must carry less over the link than the subscription's plan at its rate now, both priced on the
same view."""

from __future__ import annotations

from types import SimpleNamespace

from sharing.cost_model import Usage
from superpeer.control.adaptive_sampling import relieved


def part(**bits: float):
    return SimpleNamespace(usage=Usage({frozenset(k.split("_")): v for k, v in bits.items()}))


def test_a_sample_relieves_a_link_its_items_cross_and_not_one_its_records_cross():
    assert relieved(("A–B",), part(A_B=1000.0), part(A_B=500.0)) == ["A–B"]
    records = part(A_B=40.0)  # (window records: the same on any sample)
    assert relieved(("A–B",), records, records) == []
    assert relieved(("A–B",), part(A_B=0.0), part(A_B=0.0)) == []  # (reads a stream others read)
    assert relieved(("A–B", "B–C"), part(A_B=1000.0, B_C=40.0), part(A_B=500.0, B_C=40.0)) == ["A–B"]
