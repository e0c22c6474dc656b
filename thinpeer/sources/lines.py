"""Inputs of one item per line: XML items (``--format lines``) or JSON values (``ndjson``).

Each line is its own item, so a bad one is rejected alone — with its line number and the reason —
and the lines after it go on. Blank lines are skipped (they keep their line numbers for
messages). A line is taken when its newline has arrived, or at the end of the input.
"""

from __future__ import annotations

from collections.abc import Iterator

from thinpeer.linger import Rejected

_BLANK = b" \t\r\n"


def numbered_lines(chunks: Iterator[bytes]) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, the line without its end) for every line that is not blank."""
    rest = b""
    number = 0
    for chunk in chunks:
        data = rest + chunk if rest else chunk
        lines = data.split(b"\n")
        rest = lines.pop()
        for line in lines:
            number += 1
            if line.strip(_BLANK):
                yield number, line
    if rest.strip(_BLANK):
        yield number + 1, rest


def _text(number: int, line: bytes) -> str | Rejected:
    try:
        return line.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        return Rejected(f"line {number}: not UTF-8 text (byte 0x{line[exc.start]:02x} at "
                        f"column {exc.start + 1})")


class LineItems:
    """XML items, one per line: ``item`` is the first line's element name unless given."""

    def __init__(self, chunks: Iterator[bytes], item: str | None = None) -> None:
        self._lines = numbered_lines(chunks)
        self._first: tuple[int, bytes] | None = next(self._lines, None)
        self.item = item or (_element_name(self._first[1]) if self._first else "") or "item"

    def __iter__(self) -> Iterator[str | Rejected]:
        if self._first is not None:
            yield _text(*self._first)
        for number, line in self._lines:
            yield _text(number, line)


class JsonLineItems:
    """JSON values, one per line, as ``<item>`` elements (``thinpeer.formats.json_items``)."""

    def __init__(self, chunks: Iterator[bytes], item: str) -> None:
        self._lines = numbered_lines(chunks)
        self.item = item

    def __iter__(self) -> Iterator[str | Rejected]:
        from thinpeer.formats.json_items import JsonLineError, ndjson_line_to_item

        for number, line in self._lines:
            text = _text(number, line)
            if isinstance(text, Rejected):
                yield text
                continue
            try:
                yield ndjson_line_to_item(text, self.item)
            except JsonLineError as exc:
                yield Rejected(f"line {number}: {exc}")


def _element_name(line: bytes) -> str:
    """The name of the element a line starts with ("" if it does not start with one)."""
    text = line.lstrip(_BLANK)
    if not text.startswith(b"<"):
        return ""
    end = 1
    while end < len(text) and text[end:end + 1] not in b" \t\r\n/>":
        end += 1
    try:
        return text[1:end].decode("utf-8")
    except UnicodeDecodeError:
        return ""
