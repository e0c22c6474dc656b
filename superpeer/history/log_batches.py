"""A stream's log in SQLite as its publisher's batches: one row per batch, not one per item
(and a subscription's stored results likewise: ``RESULTS``).

A batch is logged (and then acknowledged) as it came: its items' UTF-8 texts as one buffer and
their lengths, numbered from its first item. Writing a row per item cost 4 ms per 1,000 photons —
as much as checking them; a row per batch costs one insert. Reads cut the items they ask for out
of the batches that hold them; trimming drops the batches wholly below the new first item (the
one holding it stays: reads start at the stream's ``retained_from``). A state directory of an
earlier version, logged item by item, is rewritten as batches when it is opened.

A subscriber's super-peer stores its results the same way, keyed by subscription: a row per
item cost an insert and an index entry per result, about a fifth of a durable pipeline's cost.
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
CREATE TABLE IF NOT EXISTS result_batches (
    sid TEXT NOT NULL, first INTEGER NOT NULL, count INTEGER NOT NULL,
    items BLOB NOT NULL, lengths BLOB NOT NULL, PRIMARY KEY (sid, first));
"""
LOG = ("log_batches", "stream")  # (table, key): a stream's log, by stream name
RESULTS = ("result_batches", "sid")  # a subscription's stored results, by subscription
LENGTH_TYPE = "I"  # unsigned 32-bit (an item is far below 4 GB)
MIGRATE_BATCH = 1000


def insert(name: str, first: int, texts: Sequence[str], kind: tuple[str, str] = LOG) -> tuple[str, tuple]:
    """The statement that logs a batch (numbered from ``first``)."""
    batch = WireBatch.of(texts)
    table, key = kind
    verb = "INSERT OR IGNORE" if kind == RESULTS else "INSERT"  # (results stored again are the same)
    return (f"{verb} INTO {table} ({key}, first, count, items, lengths) VALUES (?, ?, ?, ?, ?)",
            (name, first, len(batch), batch.payload, array(LENGTH_TYPE, batch.lengths).tobytes()))


def read(db: sqlite3.Connection, name: str, start: int, stop: int, kind: tuple[str, str] = LOG) -> list[str]:
    """Items ``start`` up to ``stop`` of the stream's log (those it still holds), in order."""
    table, key = kind
    rows = db.execute(f"SELECT first, count, items, lengths FROM {table} WHERE {key} = ? AND first < ? AND "
                      f"first >= COALESCE((SELECT MAX(first) FROM {table} WHERE {key} = ? AND first <= ?), ?) "
                      "ORDER BY first", (name, stop, name, start, start)).fetchall()
    out: list[str] = []
    for first, _, items, raw in rows:
        out.extend(_items(items, raw)[max(start - first, 0):stop - first])
    return out


def read_all(db: sqlite3.Connection, name: str, kind: tuple[str, str]) -> list[tuple[int, list[str]]]:
    """Every batch held under ``name``: (its first item's number, its items), in order."""
    table, key = kind
    rows = db.execute(f"SELECT first, items, lengths FROM {table} WHERE {key} = ? ORDER BY first", (name,))
    return [(first, list(_items(items, raw))) for first, items, raw in rows.fetchall()]


def _items(items: bytes, raw: bytes) -> WireBatch:
    lengths = array(LENGTH_TYPE)
    lengths.frombytes(raw)
    return WireBatch(items, lengths)


def stop_sql(stream_column: str) -> str:
    """SQL for the number after the last logged item of the stream named by ``stream_column``
    (NULL when nothing is logged)."""
    return (f"(SELECT first + count FROM log_batches WHERE stream = {stream_column} "
            f"ORDER BY first DESC LIMIT 1)")


def trim(name: str, below: int, kind: tuple[str, str] = LOG) -> tuple[str, tuple]:
    """The statement that drops the batches wholly below item ``below``."""
    table, key = kind
    return f"DELETE FROM {table} WHERE {key} = ? AND first + count <= ?", (name, below)


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
