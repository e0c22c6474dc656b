"""A batch as it crosses a link: one buffer and each item's length, split only when read."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from superpeer.data.forwarding import Forwarder, LinkCounters
from superpeer.data.wire_batch import WireBatch, check_lengths, check_utf8

texts = st.lists(st.text(min_size=0, max_size=12), max_size=20)


@given(texts, st.integers(0, 25), st.integers(0, 25))
def test_a_batch_reads_sliced_and_joined_as_its_texts(items, a, b):
    batch = WireBatch.of(items)
    assert list(batch) == items and len(batch) == len(items)
    assert batch.nbytes == sum(len(x.encode()) for x in items)
    assert list(batch[a:b]) == items[a:b]
    assert list(WireBatch.joined([batch[:a], batch[a:]])) == items
    assert check_lengths(batch.payload, batch.lengths) == ""
    bare = batch.bare()  # (what waits in a link's queue: the buffer, not also its texts)
    assert bare._texts is None and bare.payload is batch.payload and list(bare) == items


def test_a_link_sends_a_received_buffer_on_whole_and_merges_it_with_the_next():
    link = Forwarder("A", "B", stub=None, counters=LinkCounters())
    received = WireBatch.of(["<i>1</i>", "<i>é</i>"])
    link.send("s", received, position=0, origins=range(0, 2))
    link.send("s", ["<i>3</i>"], position=2, origins=range(2, 3))
    assert all(b.items._texts is None for b in link.queue), "queued without their texts"
    chunk = link._take()
    request = link._request(chunk)
    assert request.payload == "<i>1</i><i>é</i><i>3</i>".encode() and list(request.lengths) == [8, 9, 8]
    assert request.first_sequence == 0 and request.numbered_by_origin and not request.items
    assert link.counters.held_bytes == 25


def test_lengths_that_do_not_cover_the_buffer_are_named():
    assert "add up to 3 bytes, the buffer has 4" in check_lengths(b"abcd", [1, 2])


def test_items_that_are_not_each_utf8_text_are_named():
    assert check_utf8("éa".encode(), [2, 1]) == ""
    assert "ends inside a UTF-8 character (byte 1" in check_utf8("é".encode(), [1, 1])
    assert "not UTF-8 text (byte 0" in check_utf8(b"\xff<i/>", [1, 4])
