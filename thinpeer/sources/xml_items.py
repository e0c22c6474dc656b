"""The child elements of a stream document's root, as item texts, as the document arrives.

The document is parsed with a pull parser fed whatever bytes have come, so each item leaves as
soon as its end tag has been read. A first parser reads only as far as the root's and the first
child's start tags (the names the stream is registered with); the bytes it read are fed again to
a parser that reports nothing but the items' and the root's end tags, so an item costs one event
in Python however many elements it holds — a document written live (``tail -f``, a pipe) is published
while it grows, and one of any size takes memory for one item at a time.

Elements that are not named like items are yielded too (the super-peer rejects them with their
number, never skipped silently); non-blank text between the children cannot be sent and is
counted in ``stray_text``. Comments and processing instructions are not data and are left out.
Entities the document defines itself are expanded (libxml2 bounds their growth); external ones
and undefined ones are errors, and no DTD or anything on the network is read. A syntax error ends the input with the line and column where it was found; the items before it
have been yielded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from lxml import etree

from wxquery.errors import InputDocumentError

PARSER_OPTIONS = {"remove_comments": True, "remove_pis": True, "huge_tree": True,
                  "resolve_entities": "internal", "no_network": True, "load_dtd": False}


class XmlItems:
    """``root``, ``item`` (the first child's name unless given) and, iterated, the items.

    Made with ``open``: it reads until the first item begins, so the stream can be registered
    with its names before the first item is complete."""

    def __init__(self, name: str, chunks: Iterator[bytes], item: str | None = None,
                 stopped: Callable[[], bool] = lambda: False) -> None:
        self.name = name  # for messages: the file, or <stdin>
        self._stopped = stopped  # a followed document the user stopped reading: unfinished, fine
        self.stray_text = 0
        self._chunks = chunks
        self._read: list[bytes] = []  # what naming the stream read, for the items' parser
        self._ended = False
        self._fed = False  # whether anything but whitespace came
        self.root, self.item = self._learn_names(item)
        self._parser = etree.XMLPullParser(events=("end",), tag=(self.item, self.root), **PARSER_OPTIONS)

    def _error(self, exc: etree.XMLSyntaxError) -> InputDocumentError:
        line, column = exc.position if exc.position else (None, None)
        return InputDocumentError(f"malformed XML: {exc.msg}", self.name, line, column)

    def _feed(self, parser: etree.XMLPullParser, data: bytes | None) -> None:
        """``data`` to ``parser``; None: the input ended."""
        try:
            if data is None:
                parser.close()
            else:
                parser.feed(data)
        except etree.XMLSyntaxError as exc:
            if data is not None or (self._fed and not self._stopped()):  # an empty input is said by the caller
                raise self._error(exc) from None

    def _next_chunk(self) -> bytes | None:
        if self._ended:
            return None
        data = next(self._chunks, None)
        if data is None:
            self._ended = True
        else:
            self._fed = self._fed or bool(data.strip())
        return data

    def _learn_names(self, item: str | None) -> tuple[str, str]:
        """The root's name and the first child's (the items'), from their start tags."""
        parser = etree.XMLPullParser(events=("start", "end"), **PARSER_OPTIONS)
        seen: list[str] = []
        while len(seen) < 2:
            data = self._next_chunk()
            if data is not None:
                self._read.append(data)
            self._feed(parser, data)
            events = list(parser.read_events())
            seen.extend(el.tag for event, el in events if event == "start" and isinstance(el.tag, str))
            if data is None or any(event == "end" and el.getparent() is None for event, el in events):
                break  # the input or the root ended with fewer than one child
        if not seen:
            raise InputDocumentError("no XML document", self.name)
        if not item and len(seen) < 2:
            raise InputDocumentError(f"no items: expected <{seen[0]}><item>…</item>…</{seen[0]}>", self.name)
        return seen[0], item or seen[1]

    def _stray(self, text: str | None) -> None:
        if text and text.strip():
            self.stray_text += 1

    def _others_before(self, root, el) -> Iterator[str]:
        """The root's children before ``el`` (not items: those were taken and removed; None:
        all), and the text between them, which was not."""
        self._stray(root.text)
        root.text = None
        # (the items after ``el`` may be parsed already: only those before it are looked at)
        before = list(root) if el is None else list(el.itersiblings(preceding=True))[::-1]
        for other in before:
            self._stray(other.tail)
            yield etree.tostring(other, encoding="unicode", with_tail=False)
            root.remove(other)

    def __iter__(self) -> Iterator[str]:
        pending, self._read = self._read, []
        while True:
            if pending:
                self._feed(self._parser, pending.pop(0))
            else:
                data = self._next_chunk()
                self._feed(self._parser, data)
                if data is None and not self._fed:
                    return
            for _, el in self._parser.read_events():
                parent = el.getparent()
                if parent is None:  # the root's end: the document is complete (a followed file too)
                    yield from self._others_before(el, None)
                    return
                if parent.getparent() is not None:
                    continue  # named like an item, but deeper in the document
                yield from self._others_before(parent, el)
                yield etree.tostring(el, encoding="unicode", with_tail=False)
                self._stray(el.tail)  # (parsed already, with the same bytes)
                parent.remove(el)  # one item at a time in memory
            if self._ended and not pending:
                return


def open_xml(name: str, chunks: Iterator[bytes], item: str | None = None,
             stopped: Callable[[], bool] = lambda: False) -> XmlItems:
    return XmlItems(name, chunks, item, stopped)
