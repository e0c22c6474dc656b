"""JSON values ↔ XML items (``thinpeer.formats.json_items``): every JSON value comes back exactly,
every item is one the super-peer accepts, query results read back as sensible JSON, bad lines are
refused with the reason, and WXQuery runs over mapped items unchanged."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from superpeer.data.items import check_items
from thinpeer.formats import json_items
from thinpeer.formats.json_items import (
    JsonLineError,
    item_to_json,
    item_to_ndjson,
    json_to_item,
    ndjson_line_to_item,
)

# Characters XML 1.0 cannot hold, and text that looks like the escapes used for them.
NOT_XML = ["\x00", "\x01", "\x08", "\x0b", "\x0c", "\x0e", "\x1f", "\ufffe", "\uffff", "\ud800", "\udfff"]
TRICKY = ["_", "x", "_x0000_", "_x005F_", "_x_", "_xD800_", "5", "true", "&", "<", "]]>", "\r", "\n", " "]
chars = st.characters() | st.sampled_from(NOT_XML + ["\u2028", "\x85", "é", "😀"])
texts = st.text(chars, max_size=12) | st.sampled_from(TRICKY + ["", "1e400", "-0", "1.0", "false"])
scalars = (st.none() | st.booleans() | st.integers() | st.integers(-(10**40), 10**40)
           | st.floats(allow_nan=False, allow_infinity=False) | texts)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(texts, inner, max_size=4), max_leaves=30)


def same(a: object, b: object) -> bool:
    """Equal as JSON texts: types (1 vs 1.0 vs True), key order and -0.0 all count."""
    return json.dumps(a) == json.dumps(b)


def accepted(text: str, item: str = "item") -> etree._Element:
    checked = check_items([text], item, 1 << 20)
    assert checked.rejected == [], checked.rejected
    return checked.values[0]


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_every_json_value_comes_back_exactly_from_an_item_the_superpeer_accepts(value):
    text = json_to_item(value, "item")
    assert same(item_to_json(text), value)
    assert same(item_to_json(accepted(text)), value)  # as parsed where it enters the network


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_a_json_line_comes_back_as_the_same_line(value):
    line = json.dumps(value)
    text = ndjson_line_to_item(line, "event")
    accepted(text, "event")
    back = item_to_ndjson(text)
    assert len(back.splitlines()) == 1 and "\n" not in back
    back.encode("utf-8")  # no lone surrogate left raw
    assert same(json.loads(back), value)


DOC_EXAMPLE = {"id": 7, "en": 2.5, "code": "5", "tags": ["a"], "gone": None, "pos": [[1, 2], []]}


@pytest.mark.parametrize("value, item", [
    (DOC_EXAMPLE,
     ('<event><id>7</id><en>2.5</en><code json="string">5</code><tags json="single">a</tags>'
      '<gone json="null"/><pos json="array"><pos>1</pos><pos>2</pos></pos><pos json="array"/></event>')),
    ({"a": "x", "n": -1.5e-07, "b": True, "l": [1, "y"], "o": {"z": 0}, "s": ""},
     '<event><a>x</a><n>-1.5e-07</n><b>true</b><l>1</l><l>y</l><o><z>0</z></o><s/></event>'),
    ({"": 1, "a b": 2, "_x0020_": 3, "1st": 4, "x:y": 5},
     ('<event><_x_>1</_x_><a_x0020_b>2</a_x0020_b><_x005F_x0020_>3</_x005F_x0020_>'
      '<_x0031_st>4</_x0031_st><x_x003A_y>5</x_x003A_y></event>')),
    ({"e": [], "o": {}, "one": [{}], "nest": [[]], "t": "true", "q": "a<&>\r"},
     ('<event><e json="array"/><o json="object"/><one json="single object"/>'
      '<nest json="single array"/><t json="string">true</t><q>a&lt;&amp;&gt;&#13;</q></event>')),
    ([1, [2], {"k": None}], ('<event json="array"><event>1</event><event json="array"><event>2</event>'
                             '</event><event><k json="null"/></event></event>')),
    (3, "<event>3</event>"), (None, '<event json="null"/>'), ("", "<event/>"),
    ({"bell": "a\x07_b"}, '<event><bell json="escaped">a_x0007__x005F_b</bell></event>'),
])
def test_the_documented_mapping(value, item):
    assert json_to_item(value, "event") == item
    assert same(item_to_json(item), value)


def test_the_module_docstring_example_is_what_the_code_does():
    doc = json_items.__doc__
    assert json.dumps(DOC_EXAMPLE) in doc
    assert item_to_ndjson(json_to_item(DOC_EXAMPLE, "event")) in doc
    assert json_to_item(DOC_EXAMPLE, "event").replace("<gone", "\n      <gone") in doc


def test_the_common_case_carries_no_marks():
    value = {"id": 12, "coord": {"ra": 120.5, "dec": -3.25}, "name": "Vega", "tags": ["a", "b"],
             "ok": False, "note": "", "zip": "007"}
    assert "json=" not in json_to_item(value, "photon")


@pytest.mark.parametrize("value", [
    [[1, 2], [3]], [[]], [[[]]], [[[1]]], [{}], {"a": [[]]}, {"a": [{}]}, {"a": [[1]]}, {"a": [[1], []]},
    {"a": [None]}, {"a": ["5"]}, {"a": [""]}, {"a": [True, "true"]}, {"a": {"a": {"a": [1]}}},
    -0.0, 0.0, 1e100, 5e-324, 1.7976931348623157e308, 10**30, -(10**30), "", "5", "-0", "1e5", "null",
    "  ", "\t", "\r\n", "é😀", "\ud83d", "_x0041_", "\x00", {"_x_": 1, "": 2}, {"\x00": "\x00"},
    {"xml": 1, "XML-x": 2, "é": 3, "-": 4, ".": 5, "😀": 6, "\ud800": 7},
])
def test_edge_values_come_back(value):
    text = json_to_item(value, "item")
    accepted(text)
    assert same(item_to_json(text), value)


def test_nesting_is_limited_to_what_the_superpeer_parses():
    deep: object = 1
    for _ in range(json_items.MAX_DEPTH - 1):
        deep = [deep]
    assert same(item_to_json(accepted(json_to_item(deep, "item"))), deep)
    with pytest.raises(JsonLineError, match="nested deeper than the 255 levels"):
        json_to_item([deep], "item")
    with pytest.raises(JsonLineError, match="nested"):
        ndjson_line_to_item("[" * 100_000 + "]" * 100_000, "item")


def test_values_that_are_not_json_are_refused():
    with pytest.raises(JsonLineError, match="NaN is not JSON"):
        json_to_item({"a": math.nan}, "item")
    with pytest.raises(JsonLineError, match="-Infinity is not JSON"):
        json_to_item([-math.inf], "item")
    with pytest.raises(TypeError, match="keys must be strings"):
        json_to_item({1: 2}, "item")
    with pytest.raises(TypeError, match="set is not a JSON value"):
        json_to_item({1}, "item")


@pytest.mark.parametrize("line, reason", [
    ('{"id": 1 "energy": 2}', "not JSON: Expecting ',' delimiter (column 10)"),
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ('{"o": {"b": 1, "b": 1}}', "duplicate key 'b'"),
    ("NaN", "NaN is not JSON"),
    ('{"x": Infinity}', "Infinity is not JSON"),
    ("[-Infinity]", "-Infinity is not JSON"),
    ("1e400", "number 1e400 is beyond the range of a double"),
    ('{"a": 1} {"b": 2}', "not JSON: Extra data (column 10)"),
    ('{"a": 1},', "not JSON: Extra data (column 9)"),
    ("", "empty line: a JSON line holds one value"),
    ("  \t", "empty line: a JSON line holds one value"),
    ("{'a': 1}", "not JSON: Expecting property name enclosed in double quotes (column 2)"),
    ("[1, 2", "not JSON: Expecting ',' delimiter (column 6)"),
    ("<event/>", "not JSON: Expecting value (column 1)"),
])
def test_malformed_lines_are_refused_with_the_reason(line, reason):
    with pytest.raises(JsonLineError) as exc:
        ndjson_line_to_item(line, "event")
    assert str(exc.value) == reason
    assert isinstance(exc.value, ValueError)


def test_a_line_may_have_surrounding_whitespace_and_escapes():
    text = ndjson_line_to_item(' {"s": "\\u0000\\ud800\\u00e9"}\r\n', "event")
    assert item_to_json(accepted(text, "event")) == {"s": "\x00\ud800é"}
    assert item_to_ndjson(text) == '{"s":"\\u0000\\ud800é"}'


@pytest.mark.parametrize("xml, value", [
    ("<r><count>5</count><avg>2.5</avg><name>x</name><e>1</e><e>2</e></r>",
     {"count": 5, "avg": 2.5, "name": "x", "e": [1, 2]}),
    ("<r><a>1</a><b/><a>2</a></r>", {"a": [1, 2], "b": ""}),
    ("<r>\n  <a>true</a>\n  <b>false</b>\n  <c>TRUE</c>\n</r>", {"a": True, "b": False, "c": "TRUE"}),
    ("<r><n>007</n><m> 5</m><f>1.0</f><z>-0</z><big>1e400</big><x>1e5</x><h>0x1F</h></r>",
     {"n": "007", "m": " 5", "f": 1.0, "z": 0, "big": "1e400", "x": 100000.0, "h": "0x1F"}),
    ('<r id="3" name="v"><b>x</b></r>', {"@id": 3, "@name": "v", "b": "x"}),
    ('<r><p unit="keV">1.5</p></r>', {"p": {"@unit": "keV", "#text": 1.5}}),
    ("<r>Hello <b>x</b> world</r>", {"b": "x", "#text": "Hello  world"}),
    ('<r><a json="maybe">1</a><b json="string single">2</b></r>',
     {"a": {"@json": "maybe", "#text": 1}, "b": ["2"]}),
    ("<r><!-- c --><a>1<?pi x?></a></r>", {"a": 1}),
    ('<r xmlns:g="urn:g"><g:a g:u="1">2</g:a></r>', {"a": {"@u": 1, "#text": 2}}),
    ("<r><a_x0020_b>1</a_x0020_b></r>", {"a b": 1}),
    ("<r/>", ""), ("<r>text</r>", "text"), ("<r>4</r>", 4),
])
def test_results_built_by_queries_are_read_sensibly(xml, value):
    assert same(item_to_json(xml), value)


def test_item_to_ndjson_is_one_compact_line():
    assert item_to_ndjson("<r><a>é</a><b>x\ny</b><c>\u2028\x85</c></r>") == \
        '{"a":"é","b":"x\\ny","c":"\\u2028\\u0085"}'
    assert item_to_ndjson(b"  <r><n>1</n></r>\n") == '{"n":1}'


def test_wxquery_runs_over_mapped_items_unchanged():
    from network_harness import reference_results

    lines = ['{"id": 1, "energy": 2.5, "tags": ["a"]}',
             '{"id": "7", "energy": 1.5, "tags": ["b", "c"]}',
             '{"id": 3, "energy": 1.75, "err": null, "tags": []}',
             '{"id": 4, "energy": 0.5}']
    items = [ndjson_line_to_item(line, "event") for line in lines]
    assert check_items(items, "event", 1 << 20).rejected == []
    query = ('<r>{ for $e in stream("s")/events/event where $e/energy > 1.5 '
             'return <hit>{ $e/id }{ $e/tags }</hit> }</r>')
    results = reference_results(query, items, root="events")
    assert [item_to_ndjson(r) for r in results] == ['{"id":1,"tags":["a"]}', '{"id":3,"tags":[]}']
    counts = reference_results('<r>{ for $e in stream("s")/events/event return <n>{ count($e/tags) }</n> }</r>',
                               items, root="events")
    assert [item_to_json(r) for r in counts] == [1, 2, 1, 0]  # an empty array is its one marker
    strings = reference_results('<r>{ for $e in stream("s")/events/event where $e/id >= 7 return $e }</r>',
                                items, root="events")
    assert [item_to_json(r) for r in strings] == [json.loads(lines[1])]
