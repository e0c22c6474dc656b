"""What a published item is (DESIGN.md §7): exactly one well-formed element of the stream's item
type, checked once where it enters. Real parts of eight super-peers in one process: a local
subscriber (parsed values at the publisher's peer) and a remote one (the wire text, parsed at
the far end) must see the same items, and every bad item is rejected alone, by number."""

from __future__ import annotations

import pytest
from superpeer_fakes import buffered_results as results
from superpeer_fakes import photon_network

from photons.generator import generate

PHOTONS = [p.to_xml() for p in generate(10, seed=4)]
WHOLE = '<r>{ for $p in stream("photons")/photons/photon return $p }</r>'
P = PHOTONS[0]

# (item, what the rejection says)
BAD = [
    (P + "trailing", "text after the element"),
    (P + P, "more than one element"),
    ("<photon><![CDATA[x", "CDATA section that is not closed"),
    ("]]></photon>" + P, "starts with text"),
    ("", "empty"),
    ('<?xml version="1.0"?>' + P, "XML declaration"),
    ('<!DOCTYPE photon [<!ENTITY e "boom">]><photon><en>&e;</en></photon>', "DOCTYPE"),
    ("<photon><en>&e;</en></photon>", "Entity 'e' not defined"),
    ("<!-- note -->" + P, "comment"),
    (P + "<!-- note -->", "comment or processing instruction after"),
    (P + "<?pi x?>", "comment or processing instruction after"),
    ("<photon><en>1</photon>", "Opening and ending tag mismatch"),
    ("<nope/>", "<nope> is not a <photon> item"),
    (b"<photon><en>\xff</en></photon>", "not UTF-8"),
    ("<a>" * 300 + "</a>" * 300, "nested deeper than the 256 elements"),
]




@pytest.fixture
def network():
    yield from photon_network(PHOTONS[:2])


@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_bad_boundaries_are_rejected_and_every_subscriber_sees_the_same_items(network, as_bytes):
    """Before: the batch was parsed as one document, so "<photon/>trailing", two elements in
    one item or a CDATA section split over two items were accepted at SP4 and delivered to its
    own subscriber, while SP1, parsing the forwarded text item by item, dropped them."""
    local = network.peers["SP4"].control.subscribe(WHOLE, "data-shipping")
    remote = network.peers["SP1"].control.subscribe(WHOLE, "data-shipping")
    # as many elements as items when the batch is read as one document
    batch = [PHOTONS[2], PHOTONS[3] + "trailing", "<photon><en>1</en><![CDATA[x",
             "]]></photon>" + PHOTONS[4], "<photon/><photon/>", "", PHOTONS[5],
             " \n" + PHOTONS[6] + "\n"]
    accepted, rejected, reasons, *_ = network.peers["SP4"].data.publish(
        "photons", [encoded(i) for i in batch] if as_bytes else batch)
    assert (accepted, rejected) == (3, 5)
    assert [r.split(":")[0] for r in reasons] == ["item 3", "item 4", "item 5", "item 6", "item 7"]
    network.peers["SP4"].data.close_stream("photons")
    expected = [PHOTONS[2], PHOTONS[5], PHOTONS[6]]  # whitespace around an item is trimmed
    assert results(local) == expected
    assert results(remote) == expected
    assert network.peers["SP1"].data.status()["dropped_malformed_transfers"] == 0


def encoded(item: str | bytes) -> bytes:
    return item if isinstance(item, bytes) else item.encode("utf-8")


@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])  # (bytes: as gRPC gives them)
@pytest.mark.parametrize("item,reason", BAD, ids=[str(i) for i in range(len(BAD))])
def test_what_is_not_an_item(network, item, reason, as_bytes):
    """Each is refused alone, with its number and why; the items around it go on."""
    record = network.peers["SP1"].control.subscribe(WHOLE, "data-shipping")
    batch = [PHOTONS[2], item, PHOTONS[3]]
    accepted, rejected, reasons, *_ = network.peers["SP4"].data.publish(
        "photons", [encoded(i) for i in batch] if as_bytes else batch)
    assert (accepted, rejected) == (2, 1), reasons
    assert reasons[0].startswith("item 3: ") and reason in reasons[0], reasons
    network.peers["SP4"].data.close_stream("photons")
    assert results(record) == [PHOTONS[2], PHOTONS[3]]


def test_a_clean_batch_of_bytes_is_taken_whole(network):
    """The batch as gRPC gives it (bytes), whitespace around items trimmed, nothing refused."""
    record = network.peers["SP1"].control.subscribe(WHOLE, "data-shipping")
    batch = [b" " + encoded(p) + b"\n" for p in PHOTONS[2:8]] + ["<photon><en>\u00e9</en></photon>".encode()]
    accepted, rejected, *_ = network.peers["SP4"].data.publish("photons", batch)
    assert (accepted, rejected) == (7, 0)
    network.peers["SP4"].data.close_stream("photons")
    assert results(record) == [*PHOTONS[2:8], "<photon><en>\u00e9</en></photon>"]


def test_entities_are_never_expanded():
    """The billion-laughs shape: refused before any expansion, whatever the nesting."""
    from superpeer.data.items import check_items

    doctype = ('<!DOCTYPE photon [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;">'
               '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;">]>')
    checked = check_items([doctype + "<photon>&c;</photon>", "<photon>&c;</photon>",
                           "<photon>&lt;&amp;&#65;</photon>"], "photon", 1 << 20)
    assert [k for k, _ in checked.rejected] == [0, 1]
    assert checked.texts == ["<photon>&lt;&amp;&#65;</photon>"]
    assert checked.values[0].text == "<&A"


def test_the_size_limit_names_itself():
    from superpeer.data.items import check_items

    checked = check_items(["<photon>" + "x" * 100 + "</photon>", "<photon/>"], "photon", 50)
    assert checked.texts == ["<photon/>"]
    assert checked.rejected == [(0, "117 bytes, more than the 50 bytes an item may have at this "
                                    "super-peer (its --max-item-bytes)")]


def test_a_clean_batch_keeps_its_items_and_their_text():
    from superpeer.data.items import check_items

    checked = check_items(PHOTONS, "photon", 1 << 20)
    assert checked.rejected == [] and checked.texts == PHOTONS
    assert [v.findtext("en") for v in checked.values] == [p.split("<en>")[1].split("<")[0]
                                                          for p in PHOTONS]
