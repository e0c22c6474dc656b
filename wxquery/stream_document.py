"""Finite stream documents ``<root>item item …</root>`` read item by item.

The reference evaluator treats a document as a stream: items are parsed incrementally with
lxml's ``iterparse`` and released once processed, so a 100k-photon document never sits in
memory as a tree. Malformed XML is reported with its line and column, never as a traceback.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Iterator

from lxml import etree

from .errors import InputDocumentError


@dataclass
class StreamDocument:
    """A stream document that can be read (possibly several times) as a sequence of items."""

    name: str  # shown in error messages (file name or '<stdin>')
    path: Path | None = None
    data: bytes | None = None
    root_name: str | None = field(default=None, init=False)

    @classmethod
    def from_file(cls, path: str | Path) -> "StreamDocument":
        p = Path(path)
        if not p.is_file():
            raise InputDocumentError(f"no such input file: {p}", str(p))
        return cls(name=str(p), path=p)

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<input>") -> "StreamDocument":
        return cls(name=name, data=data)

    @classmethod
    def from_text(cls, text: str, name: str = "<input>") -> "StreamDocument":
        return cls(name=name, data=text.encode("utf-8"))

    def _open(self) -> BinaryIO:
        if self.data is not None:
            return io.BytesIO(self.data)
        assert self.path is not None
        return open(self.path, "rb")

    def items(self, root_name: str, item_name: str) -> Iterator[etree._Element]:
        """Yield the children named ``item_name`` of the document element, if it is ``root_name``.

        A document whose element has another name holds no such items (XQuery path semantics);
        the whole document is still parsed, so malformed XML is always reported.
        """
        with self._open() as f:
            # Only end events of elements named like items reach Python; an item is one whose
            # parent is the document element.
            parser = etree.iterparse(f, events=("end",), tag=item_name, remove_comments=True,
                                     remove_pis=True, huge_tree=True, resolve_entities=False,
                                     no_network=True)
            try:
                for _, el in parser:
                    root = el.getparent()
                    if root is None or root.getparent() is not None:
                        continue
                    self.root_name = root.tag
                    if root.tag == root_name:
                        yield el
                    # Release what was read before this item, never what the parser has already
                    # built after it; elements the caller still references (window buffers)
                    # stay valid when unlinked from the tree.
                    while el.getprevious() is not None:
                        del root[0]
            except etree.XMLSyntaxError as exc:
                line, column = exc.position if exc.position else (None, None)
                raise InputDocumentError(f"malformed XML: {exc.msg}", self.name, line,
                                         column) from None


def string_value(el: etree._Element) -> str:
    """The XPath string value of an element (concatenated descendant text)."""
    if len(el) == 0:
        return el.text or ""
    return "".join(el.itertext())
