"""Items as they cross a link: one UTF-8 buffer per batch and each item's length in bytes.

A super-peer that only forwards or duplicates a stream never needs its items one by one: the
buffer it received is the buffer it sends on (to every next hop), merged with the stream's
neighbouring batches or cut where a batch must end. Only where something reads the items — an
operator, a subscription, an executor that takes wire texts — are they split into ``str``, once
per batch (``texts``). A ``WireBatch`` is a read-only sequence of those texts, so the data plane
treats it like the lists of texts the publisher's and executors' items come as.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from .items import utf8_size


class WireBatch(Sequence[str]):
    __slots__ = ("payload", "lengths", "_texts")

    def __init__(self, payload: bytes, lengths: Sequence[int]) -> None:
        self.payload = payload
        self.lengths = lengths
        self._texts: list[str] | None = None

    @classmethod
    def of(cls, items: Sequence[str]) -> WireBatch:
        """The batch of these texts (a ``WireBatch`` as it is)."""
        if isinstance(items, WireBatch):
            return items
        if all(x.isascii() for x in items):
            batch = cls("".join(items).encode("ascii"), [len(x) for x in items])
        else:
            encoded = [x.encode("utf-8") for x in items]
            batch = cls(b"".join(encoded), [len(b) for b in encoded])
        if isinstance(items, list):  # (the texts as they are: not split again where they are read)
            batch._texts = items
        return batch

    @classmethod
    def joined(cls, batches: Sequence[WireBatch]) -> WireBatch:
        if len(batches) == 1:
            return batches[0]
        return cls(b"".join(b.payload for b in batches), list(itertools.chain.from_iterable(b.lengths for b in batches)))

    def bare(self) -> WireBatch:
        """The same batch without its texts split out: what waits in a link's queue (the
        buffer alone, not the buffer and a copy of it as ``str``)."""
        return self if self._texts is None else WireBatch(self.payload, self.lengths)

    @property
    def nbytes(self) -> int:
        return len(self.payload)

    def texts(self) -> list[str]:
        """The items as ``str``, split once per batch."""
        if self._texts is None:
            payload, out, at = self.payload, [], 0
            if payload.isascii():
                text = payload.decode("ascii")
                for n in self.lengths:
                    out.append(text[at:at + n])
                    at += n
            else:
                for n in self.lengths:
                    out.append(payload[at:at + n].decode("utf-8"))
                    at += n
            self._texts = out
        return self._texts

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self) -> Iterator[str]:
        return iter(self.texts())

    def __getitem__(self, k):  # type: ignore[override]
        if isinstance(k, slice):
            start, stop, step = k.indices(len(self.lengths))
            if step != 1:
                return self.texts()[k]
            if start == 0 and stop == len(self.lengths):
                return self
            before = sum(self.lengths[:start])
            lengths = self.lengths[start:stop]
            return WireBatch(self.payload[before:before + sum(lengths)], lengths)
        return self.texts()[k]

    def __repr__(self) -> str:
        return f"WireBatch({len(self.lengths)} items, {len(self.payload)} bytes)"


def sizes_of(items: Sequence[str]) -> Sequence[int]:
    """Each item's UTF-8 bytes (known already for a ``WireBatch``)."""
    return items.lengths if isinstance(items, WireBatch) else [utf8_size(x) for x in items]


def text_bytes(items: Sequence[str]) -> int:
    """The UTF-8 bytes of the items together."""
    return items.nbytes if isinstance(items, WireBatch) else sum(map(utf8_size, items))


def as_texts(items: Sequence[str]) -> list[str]:
    """The items as a list of ``str`` (where something reads them one by one)."""
    return items.texts() if isinstance(items, WireBatch) else items  # type: ignore[return-value]


def check_lengths(payload: bytes, lengths: Sequence[int]) -> str:
    """Why a received batch's buffer and lengths do not agree ("" if they do)."""
    if sum(lengths) != len(payload):
        return f"the items' lengths add up to {sum(lengths):,} bytes, the buffer has {len(payload):,}"
    return ""


def check_utf8(payload: bytes, lengths: Sequence[int]) -> str:
    """Why a received batch's items are not each UTF-8 text ("" if they are): the buffer must
    decode, and no item may end inside a character."""
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the items are not UTF-8 text (byte {exc.start} of the batch)"
    at = 0
    for n in itertools.islice(lengths, max(len(lengths) - 1, 0)):
        at += n
        if at < len(payload) and payload[at] & 0xC0 == 0x80:
            return f"an item ends inside a UTF-8 character (byte {at} of the batch)"
    return ""
