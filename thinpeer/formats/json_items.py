"""JSON values as XML items and back (``publish --format ndjson``, ``subscribe --format ndjson``).

A JSON value becomes elements and text that a subscription queries as they stand (``$e/k``),
and the few facts that elements and text cannot show travel in one attribute, ``json``, which a
query need not read (it could: ``$e/k/@json``).

JSON → item (``json_to_item``, ``ndjson_line_to_item``):

- object: one child element per key, in order, named ``escape_name(key)``
  (``thinpeer.formats.names``: any key, even ``""`` or ``"a b"``, becomes a name and comes back);
- array as the value of key ``k``: one ``<k>`` per member, so ``$x/k`` selects each member and
  ``count($x/k)`` counts them. An array of one member marks it ``json="single"``; an empty array
  is one empty ``<k json="array"/>`` (the one case where ``count($x/k)`` is 1, not 0);
- any other array (a member of an array, or the whole value): one element ``json="array"``
  whose children, each named like it, are its members;
- number: its JSON text (``2.5``, ``-3``, ``1.0``, ``1e+100``), so ``$p/energy > 1.5`` compares
  it (without ``.`` or exponent it reads back as an integer); ``true`` and ``false`` as text; a
  string as its text, XML-escaped (``""`` is an empty element);
- ``json="…"`` marks only what reading back would otherwise get wrong: ``string`` (a string that
  reads as a number or boolean: ``"5"``, ``"true"``), ``null``, ``object`` (``{}``), ``escaped``
  (a string holding characters XML 1.0 cannot carry — U+0000–U+0008, U+000B, U+000C,
  U+000E–U+001F, U+FFFE, U+FFFF, lone surrogates — each written ``_xHHHH_``, and every ``_`` of
  the string as ``_x005F_``). Tokens combine: ``json="single string"``.

A line is read strictly: one JSON value and nothing after it; NaN, Infinity, numbers beyond a
double, duplicate keys and nesting deeper than XML parsers allow (255 levels) are refused.

Item → JSON (``item_to_json``, ``item_to_ndjson``): the item element's own name is not part of
the value. A ``json`` mark is obeyed (the element's other attributes are then not read); one
that is not of the grammar above is an ordinary attribute. An element without a mark (as a
query's return clause builds them) is read as

- with child elements or attributes: an object; children with the same name give an array (at
  the first one's place), an attribute ``a`` the key ``"@a"``, and its own text between the
  children, trimmed, the key ``"#text"`` (none when only whitespace);
- otherwise its text: a number when it is a JSON number (and a finite double), a boolean when
  exactly ``true`` or ``false``, else a string; no text at all is ``""``. Attribute values and
  ``#text`` read the same way; comments and processing instructions are skipped.

Example — the line, its item (``--item event``), and the JSON it reads back as:

    {"id": 7, "en": 2.5, "code": "5", "tags": ["a"], "gone": null, "pos": [[1, 2], []]}
    <event><id>7</id><en>2.5</en><code json="string">5</code><tags json="single">a</tags>
      <gone json="null"/><pos json="array"><pos>1</pos><pos>2</pos></pos><pos json="array"/></event>
    {"id":7,"en":2.5,"code":"5","tags":["a"],"gone":null,"pos":[[1,2],[]]}

A result ``<r><count>5</count><avg>2.5</avg><e>1</e><e>2</e></r>`` reads as
``{"count":5,"avg":2.5,"e":[1,2]}``.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import Any

from lxml import etree

from thinpeer.formats.names import escape_name, unescape_name
from wxquery.xml_safety import SAFE_PARSER


class JsonLineError(ValueError):
    """A JSON line (or value) that cannot become an item; the message is the reason."""


MARK = "json"  # the one attribute the mapping writes
_TYPES = frozenset({"string", "null", "object", "array", "escaped"})
_SINGLE = "single"
# libxml2 refuses documents nested deeper than 256 elements; a mapped item stays within 255
# so that it still fits inside a stream document's root element.
MAX_DEPTH = 255

# A JSON number, exactly as the grammar has it (ASCII digits only, unlike Python's \d).
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
# Characters XML 1.0 cannot hold, even as character references.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# In an escaped string every "_" is escaped too: escaping only those that start an escape-like
# run would misread "_x00AB" + U+0000 ("_x00AB_x0000_").
_ESCAPE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff_]")
_ESCAPED = re.compile(r"_x([0-9A-F]{4})_")
# Line breaks other than \n that json.dumps(ensure_ascii=False) writes raw (str.splitlines and
# JavaScript split on them) and lone surrogates (no UTF-8 encoder takes them): escaped in lines.
_RAW_IN_LINE = re.compile("[\x85\u2028\u2029\ud800-\udfff]")


# Keys repeat from line to line: their names are computed once (bounded, keys are user data).
_element_name = lru_cache(maxsize=4096)(escape_name)
_key = lru_cache(maxsize=4096)(unescape_name)


# --- JSON → XML ---------------------------------------------------------------------------

def json_to_item(value: object, item: str) -> str:
    """The XML text of one ``<item>`` element holding ``value`` (see the module's mapping).

    Raises JsonLineError for values JSON cannot hold (NaN, infinities) or nesting too deep for
    XML parsers, TypeError for Python values that are not JSON at all. The text is written
    directly (as lxml would serialise the tree: the tests hold it to that), a few times faster
    than building a tree for every line."""
    parts: list[str] = []
    _element(parts, item, value, 1)
    return "".join(parts)


def _text(text: str) -> str:
    """Character data escaped as lxml writes it."""
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    if "\r" in text:
        text = text.replace("\r", "&#13;")
    return text


def _element(parts: list[str], name: str, value: object, depth: int, single: bool = False) -> None:
    """Append ``<name>`` holding ``value`` (its text, children and ``json`` mark)."""
    kind = type(value)
    if not single and depth <= MAX_DEPTH:  # the common leaves, without the general path's calls
        if kind is float and math.isfinite(value):  # type: ignore[arg-type]
            parts.append(f"<{name}>{float.__repr__(value)}</{name}>")  # type: ignore[arg-type]
            return
        if kind is int:
            parts.append(f"<{name}>{int.__repr__(value)}</{name}>")  # type: ignore[arg-type]
            return
    start = len(parts)
    parts.append("")  # the start tag, once the mark is known
    kind = _write(parts, name, value, depth)
    mark = (f"{_SINGLE} {kind}" if kind else _SINGLE) if single else kind
    open_tag = f'<{name} {MARK}="{mark}"' if mark else f"<{name}"
    if len(parts) == start + 1:
        parts[start] = open_tag + "/>"
    else:
        parts[start] = open_tag + ">"
        parts.append(f"</{name}>")


def _write(parts: list[str], name: str, value: object, depth: int) -> str:
    """Append ``value``'s content; the type mark it needs ("" when none)."""
    if depth > MAX_DEPTH:
        raise JsonLineError(f"nested deeper than the {MAX_DEPTH} levels an item may have")
    if value is None:
        return "null"
    if value is True or value is False:
        parts.append("true" if value else "false")
        return ""
    if isinstance(value, str):
        if _NOT_XML.search(value):
            parts.append(_text(_ESCAPE.sub(lambda m: f"_x{ord(m.group()):04X}_", value)))
            return "escaped"
        if value:
            parts.append(_text(value))
        return "string" if _reads_as_other(value) else ""
    if isinstance(value, int):
        parts.append(int.__repr__(value))  # what json.dumps writes (also for int subclasses)
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise JsonLineError(f"{_constant(value)} is not JSON")
        parts.append(float.__repr__(value))
        return ""
    if isinstance(value, (list, tuple)):
        for member in value:
            _element(parts, name, member, depth + 1)
        return "array"
    if isinstance(value, dict):
        if not value:
            return "object"
        for key, member in value.items():
            if not isinstance(key, str):
                raise TypeError(f"object keys must be strings, not {type(key).__name__}")
            child = _element_name(key)
            if isinstance(member, (list, tuple)) and member:
                # spread: one <key> per member, so paths and count() see the members
                for m in member:
                    _element(parts, child, m, depth + 1, single=len(member) == 1)
            else:
                _element(parts, child, member, depth + 1)
        return ""
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _reads_as_other(text: str) -> bool:
    """Whether inference would read this string's text as a number or boolean."""
    return text in ("true", "false") or _number(text) is not None


def _constant(value: float) -> str:
    return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"


# --- JSON lines ---------------------------------------------------------------------------

def ndjson_line_to_item(line: str, item: str) -> str:
    """One JSON line, parsed strictly, as the XML text of an ``<item>``; JsonLineError with the
    reason otherwise. Blank lines are the caller's to skip: here they are an error."""
    return json_to_item(parse_json_line(line), item)


def parse_json_line(line: str) -> object:
    """The JSON value of one line, or JsonLineError: Python's ``json`` accepts NaN, Infinity and
    repeated keys (the last one wins), which would silently change a publisher's data."""
    if not line.strip():
        raise JsonLineError("empty line: a JSON line holds one value")
    try:
        return json.loads(line, object_pairs_hook=_object, parse_constant=_refuse_constant,
                          parse_float=_float)
    except json.JSONDecodeError as exc:
        raise JsonLineError(f"not JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise JsonLineError("nested too deeply to be read") from None
    except ValueError as exc:  # int() over Python's digit limit
        if isinstance(exc, JsonLineError):
            raise
        raise JsonLineError(f"not a usable number: {exc}") from None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonLineError(f"duplicate key {key!r}")
            seen.add(key)
    return obj


def _refuse_constant(name: str) -> float:
    raise JsonLineError(f"{name} is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise JsonLineError(f"number {text} is beyond the range of a double")
    return value


# --- XML → JSON ---------------------------------------------------------------------------

def item_to_json(text: str | bytes | etree._Element) -> object:
    """The JSON value an item holds: exactly the value ``json_to_item`` made it from, and for
    other XML (a query's result) the value the module's inference rules read in it."""
    el = text if isinstance(text, etree._Element) else etree.fromstring(
        (text.encode("utf-8") if isinstance(text, str) else text).strip(), parser=SAFE_PARSER)
    return _read(el)


def item_to_ndjson(text: str | bytes | etree._Element) -> str:
    """An item as one compact JSON line: no line break of any kind inside, and no end."""
    line = json.dumps(item_to_json(text), ensure_ascii=False, separators=(",", ":"))
    # json.dumps writes these raw only inside strings, where an escape means the same
    return _RAW_IN_LINE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


def _mark(el: etree._Element) -> tuple[str, bool] | None:
    """(type, single) of a valid ``json`` mark; None when there is none or it is not ours."""
    raw = el.get(MARK)
    if raw is None:
        return None
    tokens = raw.split()
    single = _SINGLE in tokens
    types = [t for t in tokens if t != _SINGLE]
    if not tokens or len(types) > 1 or (types and types[0] not in _TYPES) or tokens.count(_SINGLE) > 1:
        return None
    return (types[0] if types else "", single)


def _read(el: etree._Element) -> object:
    """The value of one element (its name aside)."""
    mark = _mark(el)
    kind = mark[0] if mark else ""
    if kind == "null":
        return None
    if kind == "string":
        return el.text or ""
    if kind == "escaped":
        return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), el.text or "")
    if kind == "array":
        return [_read(child) for child in _children(el)]
    children = _children(el)
    attributes = [(k, v) for k, v in el.attrib.items() if not (mark and k == MARK)]
    if kind == "object" or children or attributes:
        return _object_of(el, children, attributes)
    return _scalar(el.text or "")


def _object_of(el: etree._Element, children: list[etree._Element],
               attributes: list[tuple[str, str]]) -> dict[str, object]:
    """An object: ``@`` attributes, then the children grouped by name, then ``#text``."""
    obj: dict[str, object] = {"@" + _local(k): _scalar(v) for k, v in attributes}
    groups: dict[str, list[etree._Element]] = {}
    for child in children:
        groups.setdefault(_key(_local(child.tag)), []).append(child)
    for key, members in groups.items():
        if len(members) > 1:
            obj[key] = [_read(m) for m in members]
        else:
            mark = _mark(members[0])
            obj[key] = [_read(members[0])] if mark and mark[1] else _read(members[0])
    own = "".join([el.text or ""] + [c.tail or "" for c in el]).strip()
    if own:
        obj["#text"] = _scalar(own)
    return obj


def _local(name: str) -> str:
    """A name without its namespace (``{uri}local`` → ``local``): queries have none."""
    return name.rsplit("}", 1)[1] if name[0] == "{" else name


def _children(el: etree._Element) -> list[etree._Element]:
    """Child elements (comments and processing instructions are not part of the value)."""
    return [c for c in el if isinstance(c.tag, str)]


def _scalar(text: str) -> object:
    """A leaf's text as the JSON scalar it reads as."""
    if text == "true":
        return True
    if text == "false":
        return False
    number = _number(text)
    return text if number is None else number


def _number(text: str) -> int | float | None:
    """The number a JSON number's text denotes; None for other text and for numbers that are
    no finite double (``1e400``) or too long for Python to convert."""
    if not text or text[-1] not in "0123456789" or not _NUMBER.fullmatch(text):
        return None
    try:
        if "." in text or "e" in text or "E" in text:
            value = float(text)
            return value if math.isfinite(value) else None
        return int(text)
    except ValueError:
        return None
