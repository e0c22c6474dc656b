"""Where a replay reads a stream's past (hybrid history, issue 15): the archive's Parquet files
(``archive.writer``) for items older than the log keeps, then the log (``state_store``), then live.
Without an archive the log alone is the history."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..peer_state import OriginalState
from .archive.layout import ArchiveLayout, ChunkFile, chunks
from .state_store import StateStore


@dataclass
class ArchivedPast:
    first: int  # the first archived position
    stop: int  # the position after the last archived one
    oldest_at: float | None  # the arrival time of the first archived item


def floor_of(original: OriginalState, past: ArchivedPast | None) -> int:
    """The oldest item a replay can start from, given what the archive holds: the archive's
    first item if it reaches the log without a gap, else the log's."""
    if past is not None and past.stop >= original.retained_from:
        return min(past.first, original.retained_from)
    return original.retained_from


class HistorySource:
    def __init__(self, store: StateStore, archive_root=None) -> None:
        self.store = store
        self.layout = ArchiveLayout(archive_root) if archive_root is not None else None
        self._cached: tuple[tuple, list[tuple[int, str]]] | None = None  # the last chunk read

    def archived(self, name: str) -> ArchivedPast | None:
        if self.layout is None:
            return None
        files = self.layout.files(name)
        if not files:
            return None
        first = min(f.first for f in files)
        head = [f for f in files if f.first == first]
        oldest = min(float(pc.min(pq.read_table(f.path, columns=["arrival"]).column("arrival")).as_py() or 0)
                     for f in head)
        return ArchivedPast(first, max(f.last for f in files) + 1, oldest)

    def floor(self, original: OriginalState) -> int:
        """The oldest item a replay can start from."""
        return floor_of(original, self.archived(original.name))

    def first_since(self, original: OriginalState, t: float) -> int | None:
        """The first archived position that arrived at ``t`` or later, if the archive holds one
        before the log's first item (None: ask the log)."""
        past = self.archived(original.name)
        if past is None or past.oldest_at is None or past.first >= original.retained_from:
            return None
        for first, _, files in chunks(self.layout.files(original.name)):  # position order
            if first >= original.retained_from:
                break
            found = []
            for f in files:  # a chunk's buckets are not in position order between them
                table = pq.read_table(f.path, columns=["position", "arrival"])
                late = table.column("position").to_numpy()[table.column("arrival").to_numpy() >= t]
                if late.size:
                    found.append(int(late.min()))
            if found:
                return min(found)
        return None

    def read(self, name: str, start: int, stop: int, retained_from: int) -> list[str]:
        """Items ``start`` up to ``stop`` of a stream's past, from the archive below the log."""
        if start >= retained_from or self.layout is None:
            return self._log(name, start, stop)
        texts: list[str] = []
        upto = min(stop, retained_from)
        for key, files in self._chunks(name, start, upto):
            rows = self._chunk(name, key, files)
            texts.extend(t for p, t in rows if start <= p < upto)
        if len(texts) != upto - start:
            raise RuntimeError(f"{name}: items {start}–{upto - 1} are neither in the archive nor in the log")
        if stop > retained_from:
            texts.extend(self._log(name, retained_from, stop))
        return texts

    def watermarks(self, name: str, start: int, stop: int, retained_from: int) -> list[tuple[int, str, float]]:
        """The watermarks sent after item ``start`` up to ``stop`` of a stream's past: the
        archive's below the log, the log's (which win where both have one) above."""
        marks = {m[0]: m for m in self.layout.watermarks(name, start, min(stop, retained_from))} \
            if self.layout is not None and start < retained_from else {}
        marks.update((m[0], m) for m in self.store.read_watermarks(name, start, stop))
        return [marks[a] for a in sorted(marks)]

    def _log(self, name: str, start: int, stop: int) -> list[str]:
        texts = self.store.read_log(name, start, stop)
        if len(texts) != stop - start:  # trimmed: never while a replay pins it; never sent misnumbered
            raise RuntimeError(f"{name}: items {start}–{stop - 1} are no longer in the log")
        return texts

    def _chunks(self, name: str, start: int, stop: int) -> list[tuple[tuple[int, int], list[ChunkFile]]]:
        by: dict[tuple[int, int], list[ChunkFile]] = {}
        for f in self.layout.files(name):
            if f.last >= start and f.first < stop:
                by.setdefault((f.first, f.last), []).append(f)
        return sorted(by.items())

    def _chunk(self, name: str, key: tuple[int, int], files: list[ChunkFile]) -> list[tuple[int, str]]:
        if self._cached is not None and self._cached[0] == (name, key):
            return self._cached[1]
        positions, items = [], []
        for f in files:
            table = pq.read_table(f.path, columns=["position", "item"])
            positions.append(table.column("position").to_numpy())
            items.extend(table.column("item").to_pylist())
        order = np.argsort(np.concatenate(positions), kind="stable") if positions else []
        flat = np.concatenate(positions) if positions else np.array([], dtype=np.int64)
        rows = [(int(flat[i]), items[i]) for i in order]
        self._cached = ((name, key), rows)
        return rows
