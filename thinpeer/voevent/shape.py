"""A VOEvent as a StreamGlobe item, and a result item as a VOEvent.

A VOEvent keeps most of what matters in attributes (``ivorn``, ``role``, every ``Param``'s
``name`` and ``value``). WXQuery can read those (``$p/What/Param[@name = "RA"]/@value``), but a
query is shorter, and a stream projected smaller, over an item in which every value is an
element's text. So a packet is published as an *item* of its own shape, attribute-free::

    <voevent>
      <ivorn>ivo://nasa.gsfc.gcn/SWIFT#BAT_GRB_Pos_532871-729</ivorn>
      <role>observation</role>          observation | prediction | utility | test
      <version>2.0</version>
      <author><ivorn>ivo://nasa.gsfc.tan/gcn</ivorn><shortName>VO-GCN</shortName>…</author>
      <date>2012-09-07T00:24:36</date>   Who/Date: when the packet was written
      <coord_system>UTC-FK5-GEO</coord_system>
      <time>2012-09-07T00:24:23.08</time>       WhereWhen's ISOTime
      <ra>74.741200</ra><dec>-9.313700</dec>    <lon>/<lat> for a system that is not equatorial
      <error>0.050000</error><unit>deg</unit>   the error radius and the position's unit
      <importance>0.9</importance>              Why/@importance
      <params>
        <Packet_Type>61</Packet_Type>           every What/Param, by name, its value as text
        <Merit_Values><Merit_Val0>1</Merit_Val0>…</Merit_Values>   a Group: its Params inside
        <averagemag_x0020_error>0.05</averagemag_x0020_error>      names escaped (escape_name)
      </params>
      <tables><NAME><row><FIELD>text</FIELD>…</row>…</NAME></tables>   What/Table, by Field name
      <packet>&lt;?xml version="1.0" ?&gt;&lt;voe:VOEvent …</packet>  the packet, as it came
    </voevent>

A part the packet lacks is absent; an empty value is an empty element. Names are escaped with
``thinpeer.formats.names.escape_name`` (``unescape_name`` gives the Param's name back); a Param
without a name is ``_x_`` (the escape of ""), the Params of a Group without a name stand in the
Group's place. A Param's value is its ``value`` attribute, else its ``<Value>`` child. Versions
1.1 and 2.0 and packets without a namespace are read alike.

The other way, ``result_voevent`` makes a VOEvent 2.0 packet of any result element: each leaf
element (one without child elements) becomes a ``Param`` named by ``unescape_name`` of its name
with its text as value — those directly in the result in ``What``, the others in a ``Group`` per
element holding them, named by its path (``a/b``) — so a result in the item shape's ``params``
comes out as the Params it was made of.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

from lxml import etree

from thinpeer.formats.names import escape_name as _escape_name
from thinpeer.formats.names import unescape_name
from thinpeer.voevent.transport import VOEVENT_ROLES, xml_text
from wxquery.xml_safety import SAFE_PARSER

VOEVENT_NS = "http://www.ivoa.net/xml/VOEvent/v2.0"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
NAMESPACES = frozenset({VOEVENT_NS, "http://www.ivoa.net/xml/VOEvent/v1.1", None})
ROOT = "voevents"  # the stream's root element and item: register_stream(name, ROOT, ITEM)
ITEM = "voevent"
EQUATORIAL = ("ICRS", "FK5", "FK4")  # coordinate systems whose C1, C2 are RA and Dec


# a packet's names repeat from packet to packet of its kind: escaped once (half the time otherwise)
escape_name = lru_cache(maxsize=4096)(_escape_name)


class NotVoEvent(ValueError):
    """The input is not a VOEvent; the message says why."""


def parse_voevent(packet: bytes | str) -> etree._Element:
    """The packet's root element, parsed safely; ``NotVoEvent`` with the reason otherwise."""
    data = packet.encode("utf-8") if isinstance(packet, str) else bytes(packet)
    try:
        root = etree.fromstring(data, parser=SAFE_PARSER)
    except etree.XMLSyntaxError as exc:
        raise NotVoEvent(f"not well-formed XML: {exc}") from None
    if not isinstance(root.tag, str):
        raise NotVoEvent("not a VOEvent: no root element")
    if next(root.iter(etree.Entity), None) is not None:  # as Comet: never expanded, so refused
        raise NotVoEvent("not a VOEvent: it holds entity references (they are never expanded)")
    name = etree.QName(root)
    if name.localname != "VOEvent":
        raise NotVoEvent(f"not a VOEvent: the root element is <{name.localname}>")
    if name.namespace not in NAMESPACES:
        raise NotVoEvent(f"not a VOEvent: namespace {name.namespace!r} is not VOEvent 1.1 or 2.0")
    if not root.get("ivorn"):
        raise NotVoEvent("not a VOEvent: it has no ivorn")
    role = root.get("role", "observation")  # the schema's default
    if role not in VOEVENT_ROLES:
        raise NotVoEvent(f"not a VOEvent: role {role!r} is not one of {', '.join(sorted(VOEVENT_ROLES))}")
    return root


def voevent_item(packet: bytes | str) -> str:
    """The packet as an item of the shape above (its text); ``NotVoEvent`` when it is not one."""
    return ivorn_and_item(packet)[1]


def ivorn_and_item(packet: bytes | str) -> tuple[str, str]:
    """The packet's IVORN and its item (one parse for both); ``NotVoEvent`` when it is not one."""
    root = parse_voevent(packet)
    item = etree.Element(ITEM)
    _text(item, "ivorn", root.get("ivorn"))
    _text(item, "role", root.get("role", "observation"))
    _text(item, "version", root.get("version"))
    who = _child(root, "Who")
    if who is not None:
        author = etree.Element("author")
        _text(author, "ivorn", _child_text(who, "AuthorIVORN"))
        details = _child(who, "Author")
        for detail in details if details is not None else ():
            if isinstance(detail.tag, str):
                _text(author, escape_name(etree.QName(detail).localname), _all_text(detail).strip())
        if len(author):
            item.append(author)
        _text(item, "date", _child_text(who, "Date"))
    _where_when(item, root)
    why = _child(root, "Why")
    if why is not None:
        _text(item, "importance", why.get("importance"))
    what = _child(root, "What")
    if what is not None:
        params = etree.Element("params")
        _params(params, what)
        if len(params):
            item.append(params)
        tables = etree.Element("tables")
        for table in _children(what, "Table"):
            tables.append(_table(table))
        if len(tables):
            item.append(tables)
    _text(item, "packet", _packet_text(packet, root))
    return root.get("ivorn", ""), etree.tostring(item, encoding="unicode")


def packet_of(item: str | bytes | etree._Element) -> bytes:
    """The original packet of an item made by ``voevent_item`` (UTF-8)."""
    element = item if isinstance(item, etree._Element) else etree.fromstring(
        item.encode("utf-8") if isinstance(item, str) else item, parser=SAFE_PARSER)
    found = element.find("packet")
    if found is None:
        raise NotVoEvent(f"<{element.tag}> holds no <packet>")
    return (found.text or "").encode("utf-8")


def _where_when(item: etree._Element, root: etree._Element) -> None:
    """Observatory, coordinate system, time and position of the first ObservationLocation."""
    location = _path(root, "WhereWhen", "ObsDataLocation")
    if location is None:
        return
    observatory = _child(location, "ObservatoryLocation")
    if observatory is not None:
        _text(item, "observatory", observatory.get("id"))
    observation = _child(location, "ObservationLocation")
    if observation is None:
        return
    coords = _child(observation, "AstroCoords")
    system = coords.get("coord_system_id") if coords is not None else None
    if system is None:
        declared = _child(observation, "AstroCoordSystem")
        system = declared.get("id") if declared is not None else None
    _text(item, "coord_system", system)
    if coords is None:
        return
    _text(item, "time", _child_text(_path(coords, "Time", "TimeInstant"), "ISOTime"))
    position = _child(coords, "Position2D")
    if position is None:
        return
    equatorial = system is None or any(name in system.upper() for name in EQUATORIAL)
    value = _child(position, "Value2")
    _text(item, "ra" if equatorial else "lon", _child_text(value, "C1"))
    _text(item, "dec" if equatorial else "lat", _child_text(value, "C2"))
    _text(item, "error", _child_text(position, "Error2Radius"))
    _text(item, "unit", position.get("unit"))


def _params(into: etree._Element, parent: etree._Element) -> None:
    for child in parent:
        if not isinstance(child.tag, str):
            continue
        kind = etree.QName(child).localname
        if kind == "Param":
            value = child.get("value")
            if value is None:
                value = _child_text(child, "Value", strip=False) or ""
            etree.SubElement(into, escape_name(child.get("name", ""))).text = value
        elif kind == "Group":
            name = child.get("name")
            if name is None:  # nothing to address it by: its Params stand in its place
                _params(into, child)
            else:
                group = etree.SubElement(into, escape_name(name))
                _params(group, child)


def _table(table: etree._Element) -> etree._Element:
    element = etree.Element(escape_name(table.get("name", "")))
    fields = [escape_name(field.get("name", "")) for field in _children(table, "Field")]
    data = _child(table, "Data")
    for tr in _children(data, "TR") if data is not None else ():
        row = etree.SubElement(element, "row")
        for k, td in enumerate(_children(tr, "TD")):
            name = fields[k] if k < len(fields) else escape_name(str(k + 1))
            etree.SubElement(row, name).text = _all_text(td)
    return element


def _packet_text(packet: bytes | str, root: etree._Element) -> str:
    """The packet as it came when it is UTF-8 (as good as every one), else re-encoded."""
    if isinstance(packet, str):
        return packet
    try:
        return bytes(packet).decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return etree.tostring(root.getroottree(), xml_declaration=True, encoding="UTF-8").decode("utf-8")


# ---------------------------------------------------------------------------- the other way


def utc_now() -> str:
    """A VOEvent ``Date``: UTC, to the second, without a zone (the convention brokers use)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def result_voevent(result: str | bytes | etree._Element, ivorn: str, author_ivorn: str,
                   role: str = "observation", date: str | None = None,
                   description: str | None = None) -> bytes:
    """A VOEvent 2.0 packet (UTF-8, with declaration) carrying ``result``: one Param per leaf
    element, as the module's docstring says. Deterministic: the same arguments give the same
    bytes, so a packet sent again is recognised by a broker as one it has seen (Comet keys its
    event database by the packet's digest). ValueError for a role VOEvent does not know or a
    result that is not XML."""
    if role not in VOEVENT_ROLES:
        raise ValueError(f"role {role!r} is not one of {', '.join(sorted(VOEVENT_ROLES))}")
    if isinstance(result, etree._Element):
        element = result
    else:
        try:
            element = etree.fromstring(result.encode("utf-8") if isinstance(result, str) else result,
                                       parser=SAFE_PARSER)
        except etree.XMLSyntaxError as exc:
            raise ValueError(f"the result is not well-formed XML: {exc}") from None
    root = etree.Element(f"{{{VOEVENT_NS}}}VOEvent", nsmap={"voe": VOEVENT_NS, "xsi": XSI_NS})
    root.set("ivorn", ivorn)
    root.set("role", role)
    root.set("version", "2.0")
    root.set(f"{{{XSI_NS}}}schemaLocation",
             f"{VOEVENT_NS} http://www.ivoa.net/xml/VOEvent/VOEvent-v2.0.xsd")
    who = etree.SubElement(root, "Who")
    etree.SubElement(who, "AuthorIVORN").text = author_ivorn
    etree.SubElement(who, "Date").text = date or utc_now()
    what = etree.SubElement(root, "What")
    leaf_name = unescape_name(_local(element))
    etree.SubElement(what, "Description").text = xml_text(
        description or f"a StreamGlobe result <{leaf_name}>")
    if len(element) == 0:  # a result that is one value
        _param(what, element)
    else:
        _result_params(what, element, [])
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def _result_params(what: etree._Element, element: etree._Element, path: list[str]) -> None:
    """Leaves directly in ``element``: Params of ``what`` (top level) or of a Group named by
    ``path``; elements with children: the same, one level down."""
    group = what if not path else None
    for child in element:
        if not isinstance(child.tag, str):
            continue
        if any(isinstance(c.tag, str) for c in child):
            _result_params(what, child, [*path, unescape_name(_local(child))])
            continue
        if group is None:
            group = etree.SubElement(what, "Group", name=xml_text("/".join(path)))
        _param(group, child)


def _param(into: etree._Element, leaf: etree._Element) -> None:
    etree.SubElement(into, "Param", name=xml_text(unescape_name(_local(leaf))),
                     value=xml_text(_all_text(leaf)))


# ---------------------------------------------------------------------------- helpers


def _local(element: etree._Element) -> str:
    return etree.QName(element).localname


def _children(parent: etree._Element, name: str) -> list[etree._Element]:
    """Children called ``name`` in no namespace or the VOEvent one (1.1 packets qualify some)."""
    return [c for c in parent if isinstance(c.tag, str) and etree.QName(c).localname == name]


def _child(parent: etree._Element | None, name: str) -> etree._Element | None:
    if parent is None:
        return None
    found = _children(parent, name)
    return found[0] if found else None


def _path(parent: etree._Element | None, *names: str) -> etree._Element | None:
    for name in names:
        parent = _child(parent, name)
    return parent


def _child_text(parent: etree._Element | None, name: str, strip: bool = True) -> str | None:
    found = _child(parent, name)
    if found is None:
        return None
    text = _all_text(found)
    return text.strip() if strip else text


def _all_text(element: etree._Element) -> str:
    return "".join(t for t in element.itertext() if isinstance(t, str))


def _text(parent: etree._Element, name: str, value: str | None) -> None:
    if value is not None:
        etree.SubElement(parent, name).text = value
