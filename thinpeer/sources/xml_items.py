"""The child elements of a stream document's root, as item texts, as the document arrives.

The document is parsed with a pull parser fed whatever bytes have come, so each item leaves as
soon as its end tag has been read — a document written live (``tail -f``, a pipe) is published
while it grows, and one of any size takes memory for one item at a time.

Elements that are not named like items are yielded too (the super-peer rejects them with their
number, never skipped silently); non-blank text between the children cannot be sent and is
counted in ``stray_text``. Comments and processing instructions are not data and are left out.
Entities the document defines itself are expanded (libxml2 bounds their growth); external ones
and undefined ones are errors, and no DTD or anything on the network is read. A syntax error ends the input with the line and column where it was found; the items before it
have been yielded.
"""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree

from wxquery.errors import InputDocumentError


class XmlItems:
    """``root``, ``item`` (the first child's name unless given) and, iterated, the items.

    Made with ``open``: it reads until the first item begins, so the stream can be registered
    with its names before the first item is complete."""

    def __init__(self, name: str, chunks: Iterator[bytes], item: str | None = None) -> None:
        self.name = name  # for messages: the file, or <stdin>
        self.stray_text = 0
        self._chunks = chunks
        self._parser = etree.XMLPullParser(events=("start", "end"), remove_comments=True,
                                           remove_pis=True, huge_tree=True, resolve_entities="internal",
                                           no_network=True, load_dtd=False)
        self._events: list = []
        self._depth = 0
        self.root: str = ""
        self.item: str = item or ""
        self._ended = False
        self._fed = False  # whether anything but whitespace came
        self._learn_names()

    def _error(self, exc: etree.XMLSyntaxError) -> InputDocumentError:
        line, column = exc.position if exc.position else (None, None)
        return InputDocumentError(f"malformed XML: {exc.msg}", self.name, line, column)

    def _more(self) -> bool:
        """Feed the next bytes; False at the end of the input."""
        if self._ended:
            return False
        try:
            data = next(self._chunks)
        except StopIteration:
            self._ended = True
            try:
                self._parser.close()
            except etree.XMLSyntaxError as exc:
                if self._fed:  # an unfinished document; an empty input is said below
                    raise self._error(exc) from None
            return False
        self._fed = self._fed or bool(data.strip())
        try:
            self._parser.feed(data)
        except etree.XMLSyntaxError as exc:
            raise self._error(exc) from None
        return True

    def _learn_names(self) -> None:
        """Read the root's start tag and the first child's (the items' name)."""
        seen: list[str] = []
        more = True
        while more and len(seen) < 2:
            more = self._more()
            new = list(self._parser.read_events())
            self._events.extend(new)
            seen.extend(el.tag for event, el in new if event == "start" and isinstance(el.tag, str))
            if any(event == "end" and el.getparent() is None for event, el in new):
                break  # the root ended with fewer than one child: nothing more will come
        if not seen:
            raise InputDocumentError("no XML document", self.name)
        self.root = seen[0]
        if not self.item:
            if len(seen) < 2:
                raise InputDocumentError(f"no items: expected <{self.root}><item>…</item>…"
                                         f"</{self.root}>", self.name)
            self.item = seen[1]

    def __iter__(self) -> Iterator[str]:
        while True:
            events, self._events = self._events or list(self._parser.read_events()), []
            if not events:
                if not self._more():
                    events = list(self._parser.read_events())  # what closing the parser gave
                    if not events:
                        return
                else:
                    continue
            for event, el in events:
                if event == "start":
                    self._depth += 1
                    continue
                self._depth -= 1
                if self._depth > 1:
                    continue
                # the items before were removed: text between them is now the root's text
                parent = el if self._depth == 0 else el.getparent()
                if parent is not None and parent.text and parent.text.strip():
                    self.stray_text += 1
                if parent is not None:
                    parent.text = None
                if self._depth == 0:
                    return  # the root's end: the document is complete (a followed file too)
                yield etree.tostring(el, encoding="unicode", with_tail=False)
                if el.tail and el.tail.strip():  # parsed already, with the same bytes
                    self.stray_text += 1
                if parent is not None:
                    parent.remove(el)  # one item at a time in memory


def open_xml(name: str, chunks: Iterator[bytes], item: str | None = None) -> XmlItems:
    return XmlItems(name, chunks, item)
