"""A super-peer's log: records at a level, as text or JSON lines, on stderr or in a file that
rotates (``serve --log-level``, ``--log-format``, ``--log-file``).

A daemon started by a launcher runs for days; its log must not fill the disk. With ``--log-file``
the records go to a file that is rolled over at ``--log-max-bytes`` (``FILE.1`` … ``FILE.N`` kept).
Whatever the process writes outside logging — the line saying where it serves, a traceback that
ends it, a library's message on stderr — goes to the same file: its standard output and error are
pointed at the current file, and again at each rollover, so nothing is lost to a file that was
rolled away and nothing grows beside the log.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import sys
from datetime import UTC, datetime
from pathlib import Path


class JsonLogFormatter(logging.Formatter):
    """One JSON object per log record, for log collectors (``--log-format json``)."""

    def __init__(self, peer: str) -> None:
        super().__init__()
        self.peer = peer

    def format(self, record: logging.LogRecord) -> str:
        out = {"time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
               "level": record.levelname.lower(), "peer": self.peer, "logger": record.name,
               "message": record.getMessage()}
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out)


class RotatingOutput(logging.handlers.RotatingFileHandler):
    """A rotating log file that the process's standard output and error write to as well."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        self._point_output()

    def doRollover(self) -> None:
        super().doRollover()
        self._point_output()

    def _point_output(self) -> None:
        if self.stream is None:
            self.stream = self._open()
        sys.stdout.flush()
        sys.stderr.flush()
        for fd in (1, 2):
            os.dup2(self.stream.fileno(), fd)


def configure_logging(peer: str, level: str, form: str, file: Path | None = None,
                      max_bytes: int = 16 << 20, backups: int = 3) -> None:
    """The daemon's log records at ``level`` and up, as text or JSON lines, on stderr or in
    ``file`` (rotating, with the process's own output)."""
    handler: logging.Handler = (RotatingOutput(file, max_bytes, backups) if file is not None
                                else logging.StreamHandler())
    handler.setFormatter(JsonLogFormatter(peer) if form == "json" else
                         logging.Formatter(f"%(asctime)s {peer} %(levelname)s %(message)s"))
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler], force=True)
