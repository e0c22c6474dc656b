"""What a super-peer keeps across a restart, in SQLite under ``--state-dir``.

* the streams registered here (name, shape, where the publisher stands) and their **log**: every
  accepted item, in order — a subscription whose route was cut is planned again and fed from the
  stream's first item (``DataPlane.replay``), so nothing a publisher handed over is ever lost —
  and the watermarks sent between them, so that a replay closes windows as the first run did;
* the subscriptions registered here (query text, strategy, the id their plan's streams are held
  under, where they start in each stream) and their **results**, numbered as the subscriber
  reads them: a restarted super-peer plans every unfinished subscription again, recomputes its
  results and skips those it already has, so a subscriber that resumes from its offset sees no
  gap and no duplicate.

An item is acknowledged to its publisher once it is in the log. Results are stored in batches
(and at the end): those a crash loses before they are stored are recomputed from the log. The database runs in WAL mode with ``synchronous =
NORMAL``: a killed process (``kill -9``) loses nothing written, a power cut may lose the last
transactions. Its log is checkpointed by a thread of its own (``checkpointer``), so that a
commit (a publisher's batch waiting for its acknowledgement) only appends. Without a directory the same tables live in memory (a daemon that is not durable
still replays its streams to subscriptions planned around a failure).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sharing.replay import ReplayInput

from ..data.items import utf8_size
from ..data.wire_batch import text_bytes
from . import log_batches
from .checkpointer import Checkpointer

SCHEMA = """
CREATE TABLE IF NOT EXISTS originals (
    name TEXT PRIMARY KEY, root TEXT NOT NULL, item TEXT NOT NULL, rate REAL NOT NULL,
    next_position INTEGER NOT NULL DEFAULT 0, accepted INTEGER NOT NULL DEFAULT 0,
    rejected INTEGER NOT NULL DEFAULT 0, duplicates INTEGER NOT NULL DEFAULT 0,
    closed INTEGER NOT NULL DEFAULT 0, registered_at REAL NOT NULL DEFAULT 0,
    event_time TEXT NOT NULL DEFAULT '', event_time_rate REAL NOT NULL DEFAULT 1.0,
    publisher TEXT NOT NULL DEFAULT '', history TEXT NOT NULL DEFAULT '',
    retained_from INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS arrivals (
    stream TEXT NOT NULL, first INTEGER NOT NULL, at REAL NOT NULL, bytes INTEGER NOT NULL,
    PRIMARY KEY (stream, first)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS watermarks (
    stream TEXT NOT NULL, after INTEGER NOT NULL, path TEXT NOT NULL, value REAL NOT NULL,
    PRIMARY KEY (stream, after)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS subscriptions (
    sid TEXT PRIMARY KEY, query TEXT NOT NULL, strategy TEXT NOT NULL,
    registered_at REAL NOT NULL, owner TEXT NOT NULL DEFAULT '',
    closed INTEGER NOT NULL DEFAULT 0, error TEXT NOT NULL DEFAULT '', code TEXT NOT NULL DEFAULT '',
    stale TEXT NOT NULL DEFAULT '[]', released INTEGER NOT NULL DEFAULT 0,
    starts TEXT NOT NULL DEFAULT '{}', chains TEXT NOT NULL DEFAULT '{}', user TEXT NOT NULL DEFAULT '',
    sample INTEGER NOT NULL DEFAULT 1, confidence REAL NOT NULL DEFAULT 0.95, bounds TEXT NOT NULL DEFAULT '{}',
    touched TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS intervals (
    sid TEXT NOT NULL, variable TEXT NOT NULL, window INTEGER NOT NULL, position INTEGER NOT NULL,
    estimates TEXT NOT NULL, PRIMARY KEY (sid, variable, window)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS results (
    sid TEXT NOT NULL, idx INTEGER NOT NULL, text TEXT NOT NULL,
    PRIMARY KEY (sid, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS result_resume (
    sid TEXT PRIMARY KEY, variable TEXT NOT NULL, at INTEGER NOT NULL, result INTEGER NOT NULL);
"""
DB_FILE = "superpeer.sqlite3"
ADDED_COLUMNS = [("subscriptions", "chains", "TEXT NOT NULL DEFAULT '{}'"),
                 ("subscriptions", "user", "TEXT NOT NULL DEFAULT ''"),
                 ("originals", "publisher", "TEXT NOT NULL DEFAULT ''"),
                 ("originals", "history", "TEXT NOT NULL DEFAULT ''"),
                 ("subscriptions", "sample", "INTEGER NOT NULL DEFAULT 1"),
                 ("originals", "retained_from", "INTEGER NOT NULL DEFAULT 0"),
                 ("subscriptions", "confidence", "REAL NOT NULL DEFAULT 0.95"),
                 ("subscriptions", "bounds", "TEXT NOT NULL DEFAULT '{}'"),
                 ("subscriptions", "touched", "TEXT NOT NULL DEFAULT '{}'")]


@dataclass
class StoredOriginal:
    name: str
    root: str
    item: str
    rate: float
    next_position: int
    accepted: int
    rejected: int
    duplicates: int
    closed: bool
    logged: int  # items logged (the first ``retained_from`` of them trimmed: ``history.bounds``)
    event_time: str
    event_time_rate: float
    publisher: str  # the user who registered it (``security``; "" on an insecure network)
    history: str  # its history bound as registered ("": the daemon's)
    retained_from: int  # the number of its first item still in the log


@dataclass
class HistoryExtent:
    """What a stream's log holds now: items ``first`` up to ``stop``, the oldest arrived at
    ``oldest_at`` (wall clock; None with nothing retained)."""

    first: int
    stop: int
    oldest_at: float | None
    bytes: int


@dataclass
class StoredSubscription:
    sid: str
    query: str
    strategy: str
    registered_at: float
    owner: str  # the plan id its streams are held under ("": the subscription id)
    closed: bool
    error: str
    code: str
    stale: list[str]  # plan ids of earlier plans (or attempts) some peer may still hold
    results: list[str]  # the results kept, from ``base``
    base: int  # the number of the first kept result (earlier ones were read and released)
    starts: dict[str, int]  # original -> items logged when the subscription was installed
    chains: dict[str, ReplayInput]  # input variable -> the chain it read, exactly (``sharing.replay``)
    user: str  # who created it (``security``; "" on an insecure network)
    sample: int = 1  # its plan reads a 1/sample sample of its input (``--approximate``)
    confidence: float = 0.95  # of its intervals when sampled (``subscribe --confidence``)
    bounds: dict = field(default_factory=dict)  # approximate, min_rate, weight (``adaptive_sampling``)
    # (variable, the original's item after the last one whose results are stored, the number of
    # the next result): where a subscription passing its items through resumes (``restore``)
    resume: tuple[str, int, int] | None = None
    # plan id -> the peers it was committed at (``SubscriptionRecord.touched``): removed there only
    touched: dict[str, list[str]] = field(default_factory=dict)


class StateStore:
    """One SQLite connection, used under a lock by the data and control planes."""

    def __init__(self, directory: str | Path | None) -> None:
        self.path: Path | None = None
        if directory is None:
            target = ":memory:"
        else:
            Path(directory).mkdir(parents=True, exist_ok=True)
            self.path = Path(directory) / DB_FILE
            target = str(self.path)
        self._db = sqlite3.connect(target, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._checkpointer = Checkpointer(self.path) if self.path is not None else None
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            if self._checkpointer is not None:  # (commits only append: ``checkpointer``)
                Checkpointer.prepare(self._db)
            self._db.executescript(SCHEMA)
            self._db.executescript(log_batches.SCHEMA)
            for table, column, kind in ADDED_COLUMNS:  # a state directory of an earlier version
                if column not in {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            log_batches.migrate(self._db)  # (a log an earlier version kept item by item)
            # a log written before arrivals were recorded: its items count as arrived now (a
            # duration bound keeps them that long, --since counts them as recent)
            self._db.execute("INSERT INTO arrivals (stream, first, at, bytes) "
                             "SELECT stream, MIN(first), ?, SUM(LENGTH(items)) FROM log_batches "
                             "WHERE stream NOT IN (SELECT stream FROM arrivals) GROUP BY stream", (time.time(),))
        if self._checkpointer is not None:
            self._checkpointer.start()

    @property
    def durable(self) -> bool:
        return self.path is not None

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        with self._lock:
            self._db.close()

    def _write(self, statements: list[tuple[str, tuple | list]]) -> None:
        """One transaction; a list of parameters tuples runs ``executemany``."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                for sql, params in statements:
                    if isinstance(params, list):
                        self._db.executemany(sql, params)
                    else:
                        self._db.execute(sql, params)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def reserve_ids(self, block: int) -> int:
        """The first of ``block`` stream numbers no earlier run of this peer has used: a plan's
        streams must not take the id of a stream an earlier run left at other peers."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'stream_ids'").fetchone()
        first = row[0] if row else 1  # (one thread plans at a time: the control plane's lock)
        self._write([("INSERT OR REPLACE INTO meta (key, value) VALUES ('stream_ids', ?)", (first + block,))])
        return first

    # ------------------------------------------------------------------ streams registered here

    def add_original(self, name: str, root: str, item: str, rate: float, registered_at: float,
                     event_time: str = "", event_time_rate: float = 1.0, publisher: str = "",
                     history: str = "") -> None:
        self._write([("INSERT OR IGNORE INTO originals (name, root, item, rate, registered_at, event_time, "
                      "event_time_rate, publisher, history) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      (name, root, item, rate, registered_at, event_time, event_time_rate, publisher,
                       history))])

    def set_history(self, name: str, history: str) -> None:
        self._write([("UPDATE originals SET history = ? WHERE name = ?", (history, name))])

    def append(self, name: str, first: int, texts: list[str], next_position: int, accepted: int,
               rejected: int, duplicates: int, at: float = 0.0) -> None:
        """Log a batch's accepted items (numbered from ``first``), when it arrived (``at``, wall
        clock: what ``--since`` and a duration-bounded history read) and where the stream
        stands, in one transaction: the batch is taken entirely or not at all."""
        arrival = ([("INSERT OR REPLACE INTO arrivals (stream, first, at, bytes) VALUES (?, ?, ?, ?)",
                     (name, first, at, text_bytes(texts)))] if texts else [])
        self._write([
            *([log_batches.insert(name, first, texts)] if texts else []),
            *arrival,
            ("UPDATE originals SET next_position = ?, accepted = ?, rejected = ?, duplicates = ? "
             "WHERE name = ?", (next_position, accepted, rejected, duplicates, name))])

    def arrivals(self, name: str) -> list[tuple[int, float, int]]:
        """(first item, arrival time, bytes) of every logged batch still (partly) retained, oldest first."""
        with self._lock:
            return [tuple(r) for r in self._db.execute(  # type: ignore[misc]
                "SELECT first, at, bytes FROM arrivals WHERE stream = ? ORDER BY first", (name,)).fetchall()]

    def item_sizes(self, name: str, start: int, stop: int) -> list[int]:
        """The UTF-8 sizes of logged items ``start`` up to ``stop``."""
        return [utf8_size(t) for t in self.read_log(name, start, stop)]

    def extent(self, name: str) -> HistoryExtent:
        with self._lock:
            first, stop = self._db.execute(
                f"SELECT retained_from, COALESCE({log_batches.stop_sql('o.name')}, retained_from) "
                "FROM originals o WHERE name = ?", (name,)).fetchone() or (0, 0)
            oldest, size = self._db.execute("SELECT MIN(at), SUM(bytes) FROM arrivals WHERE stream = ?",
                                            (name,)).fetchone()
        return HistoryExtent(first, stop, oldest if stop > first else None, size or 0)

    def trim(self, name: str, below: int) -> int:
        """Drop the logged items numbered below ``below`` (and their watermarks and arrivals);
        returns how many went."""
        with self._lock:
            first = self._db.execute("SELECT retained_from FROM originals WHERE name = ?", (name,)).fetchone()
        if first is None or below <= first[0]:
            return 0
        self._write([
            log_batches.trim(name, below),
            ("DELETE FROM watermarks WHERE stream = ? AND after < ?", (name, below)),
            # the batch holding item ``below`` keeps its row: its arrival still dates that item
            ("DELETE FROM arrivals WHERE stream = ? AND first < (SELECT MAX(first) FROM arrivals "
             "WHERE stream = ? AND first <= ?)", (name, name, below)),
            ("UPDATE originals SET retained_from = ? WHERE name = ?", (below, name))])
        return below - first[0]

    def close_original(self, name: str) -> None:
        self._write([("UPDATE originals SET closed = 1 WHERE name = ?", (name,))])

    def read_log(self, name: str, start: int, stop: int) -> list[str]:
        """Logged items ``start`` up to ``stop`` (those not trimmed), in order."""
        with self._lock:
            kept = self._db.execute("SELECT retained_from FROM originals WHERE name = ?", (name,)).fetchone()
            return log_batches.read(self._db, name, max(start, kept[0] if kept else 0), stop)

    def add_watermark(self, name: str, after: int, path: str, value: float) -> None:
        """A watermark sent after the first ``after`` logged items (the latest one counts)."""
        self._write([("INSERT OR REPLACE INTO watermarks (stream, after, path, value) VALUES (?, ?, ?, ?)",
                      (name, after, path, value))])

    def read_watermarks(self, name: str, start: int, stop: int) -> list[tuple[int, str, float]]:
        """(after, element, value) of the watermarks sent after item ``start`` up to ``stop``."""
        with self._lock:
            return [tuple(r) for r in self._db.execute(  # type: ignore[misc]
                "SELECT after, path, value FROM watermarks WHERE stream = ? AND after > ? AND after <= ? "
                "ORDER BY after", (name, start, stop)).fetchall()]

    def originals(self) -> list[StoredOriginal]:
        with self._lock:
            rows = self._db.execute(
                "SELECT o.name, root, item, rate, next_position, accepted, rejected, duplicates, closed, "
                f"COALESCE({log_batches.stop_sql('o.name')}, retained_from), event_time, "
                "event_time_rate, publisher, history, retained_from FROM originals o "
                "ORDER BY registered_at").fetchall()
        return [StoredOriginal(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], bool(r[8]), r[9], r[10], r[11],
                               r[12], r[13], r[14]) for r in rows]

    # ------------------------------------------------------------------ subscriptions registered here

    def add_subscription(self, sid: str, query: str, strategy: str, registered_at: float, user: str = "",
                         confidence: float = 0.95, bounds: dict | None = None) -> None:
        self._write([("INSERT OR REPLACE INTO subscriptions (sid, query, strategy, registered_at, user, confidence, "
                      "bounds) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (sid, query, strategy, registered_at, user, confidence, json.dumps(bounds or {})))])

    def set_plan(self, sid: str, owner: str, stale: list[str], starts: dict[str, int],
                 chains: dict[str, ReplayInput], sample: int = 1,
                 touched: Mapping[str, Iterable[str]] | None = None) -> None:
        """The subscription's installed plan: the id its streams are held under, the ids of
        earlier plans (and attempts) some peer may still hold, and where it starts in each
        stream it reads (what a re-plan replays), the sample it reads (1: every item), and the
        peers each plan id was committed at (a plan id not there: removed at every peer)."""
        self._write([("UPDATE subscriptions SET owner = ?, stale = ?, starts = ?, chains = ?, sample = ?, "
                      "touched = ? WHERE sid = ?",
                      (owner, json.dumps(stale), json.dumps(starts),
                       json.dumps({v: c.to_json() for v, c in chains.items()}), sample,
                       json.dumps({i: sorted(peers) for i, peers in (touched or {}).items()}), sid))])

    def end_subscription(self, sid: str, error: str, code: str) -> None:
        self._write([("UPDATE subscriptions SET closed = 1, error = ?, code = ? WHERE sid = ?",
                      (error, code, sid))])

    def remove_subscription(self, sid: str) -> None:
        self._write([("DELETE FROM subscriptions WHERE sid = ?", (sid,)),
                     ("DELETE FROM results WHERE sid = ?", (sid,)),
                     ("DELETE FROM result_batches WHERE sid = ?", (sid,)),
                     ("DELETE FROM result_resume WHERE sid = ?", (sid,)),
                     ("DELETE FROM intervals WHERE sid = ?", (sid,))])

    def add_result_runs(self, sid: str, runs: list[tuple[int, list[str]]],
                        resume: tuple[str, int] | None = None) -> None:
        """Runs of consecutive results, each (the number of its first, its results), stored as
        one batch per run; ``resume``: (variable, the original's item after the last one they
        come from), in the same transaction — a subscription whose results are its items
        resumes there after a restart (None: not known, and an earlier one no longer holds)."""
        marker = (("INSERT OR REPLACE INTO result_resume (sid, variable, at, result) VALUES (?, ?, ?, ?)",
                   (sid, resume[0], resume[1], runs[-1][0] + len(runs[-1][1]))) if resume is not None and runs else
                  ("DELETE FROM result_resume WHERE sid = ?", (sid,)))
        self._write([*(log_batches.insert(sid, first, texts, log_batches.RESULTS) for first, texts in runs), marker])

    def forget_results(self, sid: str, below: int) -> None:
        """Results before ``below`` were released: they need not survive a restart."""
        self._write([("DELETE FROM results WHERE sid = ? AND idx < ?", (sid, below)),
                     log_batches.trim(sid, below, log_batches.RESULTS),
                     # (the last window of each input stays: which windows a restart need not estimate again)
                     ("DELETE FROM intervals WHERE sid = ? AND position < ? AND window < (SELECT MAX(i.window) "
                      "FROM intervals i WHERE i.sid = intervals.sid AND i.variable = intervals.variable)",
                      (sid, below)),
                     ("UPDATE subscriptions SET released = MAX(released, ?) WHERE sid = ?", (below, sid))])

    def add_intervals(self, sid: str, rows: list[tuple[str, int, int, str]]) -> None:
        """The intervals of an approximate subscription's windows (``approximation``):
        (variable, window, result offset it arrived at, estimates as JSON)."""
        self._write([("INSERT OR REPLACE INTO intervals (sid, variable, window, position, estimates) "
                      "VALUES (?, ?, ?, ?, ?)", [(sid, *r) for r in rows])])

    def intervals(self, sid: str) -> list[tuple[str, int, int, str]]:
        """``add_intervals``' rows of a subscription, in the order they arrived."""
        with self._lock:
            return [tuple(r) for r in self._db.execute(  # type: ignore[misc]
                "SELECT variable, window, position, estimates FROM intervals WHERE sid = ? "
                "ORDER BY position, variable, window", (sid,)).fetchall()]

    def _results(self, sid: str, released: int) -> tuple[int, list[str]]:
        """(the number of the first, the results kept from there on): the batches, and the
        rows an earlier version stored one per result, from ``released`` on (a batch that
        holds the first kept result holds earlier ones too)."""
        by_number = dict(self._db.execute("SELECT idx, text FROM results WHERE sid = ? AND idx >= ?",
                                          (sid, released)).fetchall())
        for first, texts in log_batches.read_all(self._db, sid, log_batches.RESULTS):
            for k, text in enumerate(texts):
                if first + k >= released:
                    by_number.setdefault(first + k, text)
        if not by_number:
            return released, []
        base = min(by_number)
        kept: list[str] = []
        while base + len(kept) in by_number:  # (up to a gap: what follows it is computed again)
            kept.append(by_number[base + len(kept)])
        return base, kept

    def subscriptions(self) -> list[StoredSubscription]:
        with self._lock:
            rows = self._db.execute("SELECT sid, query, strategy, registered_at, owner, closed, "
                                    "error, code, stale, released, starts, chains, user, sample, confidence, bounds, touched "
                                    "FROM subscriptions "
                                    "ORDER BY registered_at").fetchall()
            found = []
            resume = {r[0]: (r[1], r[2], r[3]) for r in self._db.execute(
                "SELECT sid, variable, at, result FROM result_resume").fetchall()}
            for r in rows:
                base, results = self._results(r[0], r[9])
                found.append(StoredSubscription(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6], r[7],
                                                json.loads(r[8]), results, base,
                                                json.loads(r[10]),
                                                {v: ReplayInput.from_json(c) for v, c in json.loads(r[11]).items()},
                                                r[12], r[13], r[14], json.loads(r[15] or "{}"), resume.get(r[0]),
                                                json.loads(r[16] or "{}")))
        return found
