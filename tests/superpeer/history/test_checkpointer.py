"""The state store's WAL is checkpointed beside the writers (``checkpointer``): a commit only
appends, and the log is copied into the database meanwhile, so it does not grow without end."""

from __future__ import annotations

import time

from photons.generator import generate
from superpeer.data.wire_batch import WireBatch
from superpeer.history import checkpointer
from superpeer.history.state_store import DB_FILE, StateStore

BATCH = WireBatch.of([p.to_xml() for p in generate(1000, 3)])  # (about 170 KB: 42 pages a batch)
LOGGED = 60  # batches: 2,500 pages, where SQLite's own commits would have copied the log at 1,000


def logged(store: StateStore) -> None:
    store.add_original("photons", "photons", "photon", 1.0, 0.0)
    for k in range(LOGGED):
        store.append("photons", k * 1000, BATCH, (k + 1) * 1000, (k + 1) * 1000, 0, 0, at=time.time())


def test_a_commit_only_appends_to_the_log(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(checkpointer, "PERIOD_S", 3600.0)  # (the thread waits: only commits could copy)
    store = StateStore(tmp_path)
    try:
        logged(store)
        assert (tmp_path / f"{DB_FILE}-wal").stat().st_size > 8 << 20
        assert (tmp_path / DB_FILE).stat().st_size < 1 << 20  # (nothing copied into the database yet)
    finally:
        store.close()  # (which checkpoints what is left)
    assert (tmp_path / DB_FILE).stat().st_size > 8 << 20


def test_the_log_is_copied_into_the_database_meanwhile(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(checkpointer, "PERIOD_S", 0.05)
    store = StateStore(tmp_path)
    try:
        logged(store)
        deadline = time.monotonic() + 30
        while (tmp_path / DB_FILE).stat().st_size < 8 << 20:
            assert time.monotonic() < deadline, "the log was not checkpointed"
            time.sleep(0.05)
        assert store.read_log("photons", 59_000, 59_002) == list(BATCH[:2])
    finally:
        store.close()
    reopened = StateStore(tmp_path)  # (and after a restart every batch is there)
    try:
        assert reopened.read_log("photons", 0, 3) == list(BATCH[:3])
        assert reopened.read_log("photons", 59_998, 60_000) == list(BATCH[998:1000])
    finally:
        reopened.close()
