"""WAL checkpoints of the state store, run beside the writers instead of inside them.

SQLite in WAL mode appends every transaction to the write-ahead log and, by default, copies
the log back into the database (a *checkpoint*, with an fsync) inside whichever commit finds
the log over 1,000 pages. A super-peer's log of a stream grows by a publisher's batch per
commit (about 170 KB for 1,000 photons), so one Publish in about twenty-five waited 10–16 ms
for a checkpoint — and with it the publisher, whose next batch waits for the reply: in the
forwarding benchmark a durable pipeline ran at about two thirds of an in-memory one, although
the log costs a batch only 0.2 ms of CPU. Here the commits only append (``wal_autocheckpoint``
off), and a thread with a connection of its own checkpoints the log passively every
``PERIOD_S``: it copies what no reader still needs while the writers go on, and the log
restarts from its beginning once it has been copied whole. A killed process loses nothing
either way (the log is replayed when the database is opened).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

PERIOD_S = 0.5
LOG_LIMIT_BYTES = 64 << 20  # the log file is cut back to this once checkpointed (journal_size_limit)
log = logging.getLogger("streamglobe.superpeer")


class Checkpointer:
    def __init__(self, path: Path, period_s: float | None = None) -> None:
        self.path = path
        self.period_s = PERIOD_S if period_s is None else period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wal-checkpoint", daemon=True)

    @staticmethod
    def prepare(db: sqlite3.Connection) -> None:
        """The writers' connection: commits never checkpoint (this thread does)."""
        db.execute("PRAGMA wal_autocheckpoint=0")
        db.execute(f"PRAGMA journal_size_limit={LOG_LIMIT_BYTES}")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=5)
        try:
            while not self._stop.wait(self.period_s):
                self.checkpoint(db)
            self.checkpoint(db)
        finally:
            db.close()

    @staticmethod
    def checkpoint(db: sqlite3.Connection) -> None:
        try:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:  # (busy, or the file went away at shutdown): next period
            log.debug("WAL checkpoint of %s postponed: %s", db, exc)
