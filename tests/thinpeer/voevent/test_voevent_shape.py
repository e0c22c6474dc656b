"""The VOEvent item shape on real packets (voevent-parse's fixtures), the result→VOEvent packet
against the VOEvent 2.0 schema Comet validates with, and both ways under hypothesis."""

from __future__ import annotations

from pathlib import Path

import comet
import pytest
from comet_broker import fixture_packets
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from sharing.analysis import analyze
from thinpeer.formats.names import escape_name
from thinpeer.voevent.shape import (
    NotVoEvent,
    ivorn_and_item,
    packet_of,
    parse_voevent,
    result_voevent,
    voevent_item,
)
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

SCHEMA = etree.XMLSchema(etree.parse(str(Path(comet.__file__).parent / "schema" / "VOEvent-v2.0.xsd")))
PACKETS = fixture_packets()
SWIFT = "SWIFT_bat_position_v2.0_example.xml"


def item(name: str) -> etree._Element:
    return etree.fromstring(voevent_item(PACKETS[name]))


@pytest.mark.parametrize("name", sorted(PACKETS))
def test_every_fixture_becomes_an_attribute_free_item_that_keeps_its_packet(name):
    text = voevent_item(PACKETS[name])
    element = etree.fromstring(text)
    assert element.tag == "voevent"
    assert all(not e.attrib for e in element.iter())  # WXQuery reads no attributes
    source = parse_voevent(PACKETS[name])
    assert element.findtext("ivorn") == source.get("ivorn")
    assert element.findtext("role") == source.get("role")
    assert packet_of(text) == PACKETS[name]  # byte for byte
    # every Param of the packet, by name, with its value
    params = element.find("params")
    for param in source.iter("Param"):
        if param.get("name") and param.getparent().tag in ("What", "Group"):
            parent = param.getparent()
            scope = params if parent.tag == "What" else params.find(escape_name(parent.get("name")))
            values = [e.text or "" for e in scope.findall(escape_name(param.get("name")))]
            assert (param.get("value") or "") in values, param.get("name")


def test_the_swift_packet_in_detail():
    swift = item(SWIFT)
    assert swift.findtext("ivorn") == "ivo://nasa.gsfc.gcn/SWIFT#BAT_GRB_Pos_532871-729"
    assert swift.findtext("author/ivorn") == "ivo://nasa.gsfc.tan/gcn"
    assert swift.findtext("author/shortName") == "VO-GCN"
    assert swift.findtext("date") == "2012-09-07T00:24:36"
    assert (swift.findtext("ra"), swift.findtext("dec"), swift.findtext("error")) == \
        ("74.741200", "-9.313700", "0.050000")
    assert swift.findtext("coord_system") == "UTC-FK5-GEO"
    assert swift.findtext("time") == "2012-09-07T00:24:23.08"
    assert swift.findtext("importance") == "0.900000"
    assert swift.findtext("params/Rate_Signif") == "15.49"
    assert swift.findtext("params/Merit_Values/Merit_Val8") == "4"
    assert swift.findtext("params/Solution_Status/GRB_Identified") == "true"


def test_gaia_names_with_spaces_unnamed_params_and_values_in_value_elements():
    gaia = item("Gaia16aac.xml")
    assert gaia.findtext("params/alert-magnitude/averagemag_x0020_error") == "0.05"
    assert [e.text for e in gaia.findall("params/_x_")] == ["Gaia16aac", "G"]  # no name: _x_
    assert gaia.find("params/historic-magnitude/averagemag").text is None  # value="" : empty
    assert gaia.findtext("params/alerting_x0020_timestamp") == "2016-01-16T07:52:47"


def test_a_packet_without_what_or_wherewhen_has_those_parts_absent():
    packet = (b'<voe:VOEvent xmlns:voe="http://www.ivoa.net/xml/VOEvent/v2.0" version="2.0" '
              b'role="utility" ivorn="ivo://a.b/c#1"><Who><Date>2020-01-01T00:00:00</Date></Who>'
              b'</voe:VOEvent>')
    element = etree.fromstring(voevent_item(packet))
    assert [e.tag for e in element] == ["ivorn", "role", "version", "date", "packet"]


@pytest.mark.parametrize("packet, why", [
    (b"", "not well-formed XML"),
    (b"<a><b></a>", "not well-formed XML"),
    (b"<photon><en>1</en></photon>", "the root element is <photon>"),
    (b'<VOEvent xmlns="urn:other" ivorn="ivo://a.b/c#1"/>', "namespace 'urn:other'"),
    (b'<VOEvent role="observation"/>', "it has no ivorn"),
    (b'<VOEvent ivorn="ivo://a.b/c#1" role="rumour"/>', "role 'rumour'"),
    (b'<!DOCTYPE v [<!ENTITY x SYSTEM "file:///etc/passwd">]><VOEvent ivorn="&x;"/>', "external entity"),
    ((b'<!DOCTYPE v [<!ENTITY x SYSTEM "file:///etc/passwd">]><VOEvent ivorn="ivo://a.b/c#1">'
     b'<Who><Date>&x;</Date></Who></VOEvent>'), "entity references"),
])
def test_what_is_not_a_voevent_is_refused_with_the_reason(packet, why):
    with pytest.raises(NotVoEvent, match=why.replace("(", r"\(")):
        voevent_item(packet)


def test_a_result_becomes_a_valid_voevent_with_one_param_per_leaf():
    result = ("<hit><ivorn>ivo://x/y#1</ivorn><ra>74.7412</ra>"
              "<params><Rate_Signif>15.49</Rate_Signif><a_x0020_b>3</a_x0020_b>"
              "<Merit_Values><Merit_Val0>1</Merit_Val0></Merit_Values></params></hit>")
    packet = result_voevent(result, "ivo://streamglobe/results#sid-7", "ivo://streamglobe/results",
                            date="2026-01-02T03:04:05")
    root = etree.fromstring(packet)
    SCHEMA.assertValid(root)
    assert root.get("role") == "observation" and root.get("ivorn") == "ivo://streamglobe/results#sid-7"
    assert root.findtext("Who/AuthorIVORN") == "ivo://streamglobe/results"
    assert root.findtext("Who/Date") == "2026-01-02T03:04:05"
    top = {p.get("name"): p.get("value") for p in root.findall("What/Param")}
    assert top == {"ivorn": "ivo://x/y#1", "ra": "74.7412"}
    groups = {g.get("name"): {p.get("name"): p.get("value") for p in g.findall("Param")}
              for g in root.findall("What/Group")}
    assert groups == {"params": {"Rate_Signif": "15.49", "a b": "3"},
                      "params/Merit_Values": {"Merit_Val0": "1"}}
    # the same arguments, the same bytes: a broker recognises a packet sent again
    assert packet == result_voevent(result, "ivo://streamglobe/results#sid-7",
                                    "ivo://streamglobe/results", date="2026-01-02T03:04:05")


def test_a_whole_voevent_item_as_a_result_is_a_valid_voevent_too():
    packet = result_voevent(voevent_item(PACKETS[SWIFT]), "ivo://streamglobe/results#s-0",
                            "ivo://streamglobe/results", role="test")
    SCHEMA.assertValid(etree.fromstring(packet))


def test_a_result_that_is_one_value_and_bad_arguments():
    root = etree.fromstring(result_voevent("<count>5</count>", "ivo://a.b/c#1", "ivo://a.b/c"))
    assert [(p.get("name"), p.get("value")) for p in root.iter("Param")] == [("count", "5")]
    with pytest.raises(ValueError, match="role"):
        result_voevent("<a/>", "ivo://a.b/c#1", "ivo://a.b/c", role="rumour")
    with pytest.raises(ValueError, match="not well-formed"):
        result_voevent("<a>", "ivo://a.b/c#1", "ivo://a.b/c")


def test_wxquery_filters_voevent_items_on_position_and_params():
    """The items are what the evaluator reads: a filter on dec and on a Param's value."""
    items = [voevent_item(p) for p in PACKETS.values()]
    doc = StreamDocument.from_text("<voevents>" + "".join(items) + "</voevents>")
    south = analyze("""<south>{ for $v in stream("voevents")/voevents/voevent
                          where $v/dec < 0 return <hit>{ $v/ivorn }{ $v/dec }</hit> }</south>""")
    got = [etree.fromstring(r).findtext("ivorn") for r in evaluate(south.checked, doc).serialized_items()]
    assert got == [parse_voevent(p).get("ivorn") for p in PACKETS.values()
                   if float(etree.fromstring(voevent_item(p)).findtext("dec")) < 0]
    assert len(got) == 2
    bright = analyze("""<b>{ for $v in stream("voevents")/voevents/voevent
                          where $v/params/Rate_Signif >= 10 return $v/ivorn }</b>""")
    assert [etree.fromstring(r).text for r in evaluate(bright.checked, doc).serialized_items()] == \
        ["ivo://nasa.gsfc.gcn/SWIFT#BAT_GRB_Pos_532871-729"]


# ---------------------------------------------------------------------------- hypothesis

XML_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\ufffe\uffff").filter(
    lambda c: c in "\t\n\r" or c >= " ")
NAMES = st.text(XML_CHARS, max_size=12)
VALUES = st.text(XML_CHARS, max_size=30)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(NAMES, VALUES), min_size=1, max_size=6),
       st.dictionaries(NAMES, st.lists(st.tuples(NAMES, VALUES), min_size=1, max_size=4), max_size=3))
def test_params_go_through_a_voevent_and_back_by_name(top, groups):
    """Any names and values: result → VOEvent (schema-valid) → item gives the same params."""
    result = etree.Element("r")
    for name, value in top:
        etree.SubElement(result, escape_name(name)).text = value
    for group, params in groups.items():
        g = etree.SubElement(result, escape_name(group))
        for name, value in params:
            etree.SubElement(g, escape_name(name)).text = value
    packet = result_voevent(etree.tostring(result, encoding="unicode"), "ivo://a.b/c#1", "ivo://a.b/c")
    SCHEMA.assertValid(etree.fromstring(packet))
    params = etree.fromstring(voevent_item(packet)).find("params")

    def shape(e: etree._Element):
        return (e.tag, [shape(c) for c in e] if len(e) else e.text or "")

    assert [shape(e) for e in params] == (
        [(escape_name(n), v) for n, v in top]
        + [(escape_name(g), [(escape_name(n), v) for n, v in members]) for g, members in groups.items()])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_any_bytes_give_an_item_or_a_clear_refusal(data):
    try:
        voevent_item(data)
    except NotVoEvent as exc:
        assert str(exc)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(PACKETS)), st.data())
def test_real_packets_with_parts_cut_out_give_an_item_or_a_clear_refusal(name, data):
    root = etree.fromstring(PACKETS[name])
    elements = list(root.iter())
    for _ in range(data.draw(st.integers(1, 4))):
        victim = data.draw(st.sampled_from(elements))
        if victim.getparent() is not None:
            victim.getparent().remove(victim)
        for attribute in data.draw(st.lists(st.sampled_from(["ivorn", "role", "name", "value", "id"]),
                                             max_size=2)):
            victim.attrib.pop(attribute, None)
    try:
        ivorn, text = ivorn_and_item(etree.tostring(root))
    except NotVoEvent as exc:
        assert "not a VOEvent" in str(exc)
        return
    assert etree.fromstring(text).findtext("ivorn") == ivorn
