"""``subscribe --to-dir DIR``: results in rotating files, each complete when it appears.

A file is written aside (``.NAME.partial``), synced, recorded as being renamed, and renamed into
place, so a reader of the directory never sees half a file; then its end is recorded as the
committed offset. Started again after a stop between the two records, the sink finishes the
rename if it had not happened, and counts the file as delivered either way — also when a reader
has already taken it away. Each
file is named by the subscription and the offsets of its first and last results
(``SID-000000000000-000000000999.ndjson``), so the files read in name order are the results in
order, and a file renamed just before a crash (its offset not yet recorded) is found by its name:
started again, the sink goes on after the last complete file — no gap, no duplicate.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from thinpeer.formats.results import EXTENSIONS, render_batch
from thinpeer.sinks.base import Held, SinkError, StateFile, sync_directory

DEFAULT_ROTATE_ITEMS = 10_000
DEFAULT_ROTATE_S = 60.0
STATE_DIR = ".streamglobe"


class DirectorySink:
    def __init__(self, directory: Path, subscription: str, fmt: str = "xml",
                 rotate_items: int = DEFAULT_ROTATE_ITEMS, rotate_s: float = DEFAULT_ROTATE_S) -> None:
        if rotate_items < 1 or rotate_s <= 0:
            raise SinkError("a file holds at least one result, for more than 0 seconds")
        self.directory = directory
        self.subscription = subscription
        self.fmt = fmt
        self.rotate_items = rotate_items
        self.rotate_s = rotate_s
        self.description = f"directory {directory}"
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SinkError(f"{directory}: cannot make the directory: {exc.strerror}") from None
        if not os.access(directory, os.W_OK):
            raise SinkError(f"{directory}: cannot write there")
        self.state = StateFile(directory / STATE_DIR / f"{subscription}.json")
        self._pattern = re.compile(re.escape(subscription) + r"-(\d{12})-(\d{12})\." +
                                   re.escape(EXTENSIONS[fmt]))
        self._held = Held()
        self._committed = self._recover()

    def _recover(self) -> int | None:
        """The end of the last complete file, whether or not its offset was recorded; leftovers
        of a file being written when the sink stopped are removed."""
        record = self.state.load()
        recorded = record.get("committed")
        if record.get("renaming"):  # stopped while a complete file was being put in place
            name, end = record["renaming"]
            aside = self.directory / f".{name}.partial"
            if aside.exists():
                aside.replace(self.directory / name)
                sync_directory(self.directory)
            # (not there: it was renamed, and may have been taken away by a reader since)
            recorded = end
            self.state.save({"committed": recorded, "format": self.fmt})
        ends = [int(m.group(2)) + 1 for p in self.directory.iterdir()
                if (m := self._pattern.fullmatch(p.name))]
        for leftover in self.directory.glob(f".{self.subscription}-*.partial"):
            leftover.unlink(missing_ok=True)
        found = max(ends, default=None)
        if recorded is None and found is None:
            return None
        return max(x for x in (recorded, found) if x is not None)

    def committed(self) -> int | None:
        return self._committed

    def pending(self) -> tuple[int, int] | None:
        return None  # a file is there whole or not at all

    def write(self, offset: int, items: list[str], root: str) -> None:
        if not self._held.continues(offset):
            self.flush()
        self._held.add(offset, items, root)

    def due(self) -> bool:
        return self._held.full(self.rotate_items, self.rotate_s)

    def flush(self) -> int | None:
        while self._held.items:
            part = self._held.items[: self.rotate_items]
            self._write_file(self._held.first, part, self._committed)
            self._committed = self._held.delivered(len(part))
            self.state.save({"committed": self._committed, "format": self.fmt})
        return self._committed

    def _write_file(self, first: int, items: list[str], committed: int | None) -> None:
        """Written aside and synced; recorded as being renamed (so that a reader who takes
        the file away before its offset is recorded does not get it twice); renamed."""
        name = f"{self.subscription}-{first:012d}-{first + len(items) - 1:012d}.{EXTENSIONS[self.fmt]}"
        aside = self.directory / f".{name}.partial"
        try:
            with open(aside, "w", encoding="utf-8") as f:
                f.write(render_batch(items, self._held.root, self.fmt))
                f.flush()
                os.fsync(f.fileno())
            self.state.save({"committed": committed, "format": self.fmt,
                             "renaming": [name, first + len(items)]})
            aside.replace(self.directory / name)
        except OSError as exc:
            raise SinkError(f"{self.directory / name}: cannot write it: {exc.strerror}") from None
        sync_directory(self.directory)

    def close(self) -> None:
        pass
