"""A stream's log in SQLite as its publisher's batches: one row per batch, not one per item.

A batch is logged (and then acknowledged) as it came: its items' UTF-8 texts as one buffer and
their lengths, numbered from its first item. Writing a row per item cost 4 ms per 1,000 photons —
as much as checking them; a row per batch costs one insert. Reads cut the items they ask for out
of the batches that hold them; trimming drops the batches wholly below the new first item (the
one holding it stays: reads start at the stream's ``retained_from``). A state directory of an
earlier version, logged item by item, is rewritten as batches when it is opened.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Sequence

from ..data.wire_batch import WireBatch

SCHEMA = """
CREATE TABLE IF NOT EXISTS log_batches (
    stream TEXT NOT NULL, first INTEGER NOT NULL, count INTEGER NOT NULL,
    items BLOB NOT NULL, lengths BLOB NOT NULL, PRIMARY KEY (stream, first));
"""
LENGTH_TYPE = "I"  # unsigned 32-bit (an item is far below 4 GB)
MIGRATE_BATCH = 1000


def insert(name: str, first: int, texts: Sequence[str]) -> tuple[str, tuple]:
    """The statement that logs a batch (numbered from ``first``)."""
    batch = WireBatch.of(texts)
    return ("INSERT INTO log_batches (stream, first, count, items, lengths) VALUES (?, ?, ?, ?, ?)",
            (name, first, len(batch), batch.payload, array(LENGTH_TYPE, batch.lengths).tobytes()))


def read(db: sqlite3.Connection, name: str, start: int, stop: int) -> list[str]:
    """Items ``start`` up to ``stop`` of the stream's log (those it still holds), in order."""
    rows = db.execute("SELECT first, count, items, lengths FROM log_batches WHERE stream = ? AND first < ? AND "
                      "first >= COALESCE((SELECT MAX(first) FROM log_batches WHERE stream = ? AND first <= ?), ?) "
                      "ORDER BY first", (name, stop, name, start, start)).fetchall()
    out: list[str] = []
    for first, _, items, raw in rows:
        lengths = array(LENGTH_TYPE)
        lengths.frombytes(raw)
        out.extend(WireBatch(items, lengths)[max(start - first, 0):stop - first])
    return out


def stop_sql(stream_column: str) -> str:
    """SQL for the number after the last logged item of the stream named by ``stream_column``
    (NULL when nothing is logged)."""
    return (f"(SELECT first + count FROM log_batches WHERE stream = {stream_column} "
            f"ORDER BY first DESC LIMIT 1)")


def trim(name: str, below: int) -> tuple[str, tuple]:
    """The statement that drops the batches wholly below item ``below``."""
    return "DELETE FROM log_batches WHERE stream = ? AND first + count <= ?", (name, below)


def migrate(db: sqlite3.Connection) -> None:
    """Rewrite a log kept item by item (an earlier version's ``log`` table) as batches of
    consecutive items, in one transaction."""
    if not db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'log'").fetchone():
        return
    if not db.execute("SELECT 1 FROM log LIMIT 1").fetchone():
        return
    db.execute("BEGIN")
    try:
        for (stream,) in db.execute("SELECT DISTINCT stream FROM log").fetchall():
            run: list[str] = []
            first = last = None
            for idx, text in db.execute("SELECT idx, text FROM log WHERE stream = ? ORDER BY idx", (stream,)):
                if run and (idx != last + 1 or len(run) >= MIGRATE_BATCH):
                    db.execute(*insert(stream, first, run))
                    run = []
                if not run:
                    first = idx
                run.append(text)
                last = idx
            if run:
                db.execute(*insert(stream, first, run))
        db.execute("DELETE FROM log")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
