"""Any string as an XML element name and back, losslessly (JSON keys, VOEvent Param names).

The escape is the one .NET's ``XmlConvert.EncodeLocalName`` and SQL Server use: a character that
may not stand where it is becomes ``_xHHHH_`` (``_xHHHHHHHH_`` beyond the BMP), and every ``_``
followed by ``x`` is escaped itself (``_x005F_``), so no escape can be read where there was none
and ``unescape_name(escape_name(s)) == s`` for every string. Names are NCNames (no ``:``): WXQuery paths have no namespaces. The empty string
becomes ``_x_`` (nothing else escapes to it).
"""

from __future__ import annotations

import re

_ESCAPED = re.compile(r"_x([0-9A-F]{4}|[0-9A-F]{8})_")
_EMPTY = "_x_"


def _name_start(c: str) -> bool:
    o = ord(c)
    return (c == "_" or "A" <= c <= "Z" or "a" <= c <= "z" or 0xC0 <= o <= 0xD6 or 0xD8 <= o <= 0xF6
            or 0xF8 <= o <= 0x2FF or 0x370 <= o <= 0x37D or 0x37F <= o <= 0x1FFF
            or 0x200C <= o <= 0x200D or 0x2070 <= o <= 0x218F or 0x2C00 <= o <= 0x2FEF
            or 0x3001 <= o <= 0xD7FF or 0xF900 <= o <= 0xFDCF or 0xFDF0 <= o <= 0xFFFD
            or 0x10000 <= o <= 0xEFFFF)


def _name_char(c: str) -> bool:
    o = ord(c)
    return (_name_start(c) or c in "-." or "0" <= c <= "9" or o == 0xB7
            or 0x300 <= o <= 0x36F or 0x203F <= o <= 0x2040)


def _code(c: str) -> str:
    o = ord(c)
    return f"_x{o:04X}_" if o <= 0xFFFF else f"_x{o:08X}_"


def escape_name(name: str) -> str:
    """``name`` as an XML NCName that ``unescape_name`` turns back into it."""
    if name == "":
        return _EMPTY
    out = []
    for i, c in enumerate(name):
        ok = _name_start(c) if i == 0 else _name_char(c)
        # every "_x" is escaped, so nothing that follows can make an escape of it
        if c == "_" and name.startswith("x", i + 1):
            ok = False
        out.append(c if ok else _code(c))
    return "".join(out)


def unescape_name(name: str) -> str:
    """The string ``escape_name`` made ``name`` from (a name nobody escaped comes back as is)."""
    if name == _EMPTY:
        return ""
    return _ESCAPED.sub(_character, name)


def _character(m: re.Match) -> str:
    """The character an escape stands for; a code no character has is left as it stands."""
    code = int(m.group(1), 16)
    return chr(code) if code <= 0x10FFFF else m.group(0)


def is_name(name: str) -> bool:
    """Whether ``name`` is an XML NCName as it stands."""
    return bool(name) and _name_start(name[0]) and all(_name_char(c) for c in name[1:])
