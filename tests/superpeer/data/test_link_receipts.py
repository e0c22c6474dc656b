"""Numbered batches on a link: a retried or overlapping batch is taken once, a gap is counted,
and a restarted sender (a new epoch) starts afresh and drops its former self's numbering."""

from superpeer.data.link_receipts import LinkReceipts


def test_retries_overlaps_gaps_and_epochs() -> None:
    r = LinkReceipts()
    assert r.admit(("SP5", "e1", "s"), 0, 10) == (0, 10)
    assert r.admit(("SP5", "e1", "s"), 0, 10) == (10, 10)  # the whole batch again
    assert r.admit(("SP5", "e1", "s"), 5, 10) == (5, 15)  # overlapping
    assert r.admit(("SP5", "e1", "s"), 20, 5) == (0, 25)  # items 15..19 never came
    assert (r.duplicates, r.gaps) == (15, 5) and "15..19" in r.last_gap
    assert r.admit(("SP6", "x", "s"), 7, 3) == (0, 10)  # another sender: its own numbering
    assert r.admit(("SP5", "e2", "s"), 0, 4) == (0, 4)  # SP5 restarted
    assert ("SP5", "e1", "s") not in r.next and ("SP6", "x", "s") in r.next
