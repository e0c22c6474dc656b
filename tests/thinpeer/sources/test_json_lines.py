"""JSON lines as a publisher reads them: each a JSON value mapped to an item, a bad line
rejected alone with its number."""

from __future__ import annotations

from thinpeer.sources.lines import JsonLineItems


def test_json_lines_become_items_and_bad_ones_are_rejected_with_their_line():
    source = JsonLineItems(iter([b'{"id": 1, "en": 2.5}\n{"id": \n', b'\n{"id": 3}\n']), "event")
    out = list(source)
    assert out[0].startswith("<event>") and "<en>2.5</en>" in out[0]
    assert out[1].reason.startswith("line 2: ")
    assert out[2].startswith("<event>") and "<id>3</id>" in out[2]
