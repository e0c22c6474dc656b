"""What the web view knows of the network, read live from the super-peers.

From one super-peer's ``status`` the collector learns the backbone (every super-peer's address,
capacities, links), then reads every super-peer's ``status`` each interval, in parallel, with
the user's credentials: with security on, each super-peer shows the token only what it may see
(``superpeer.security.access``). A super-peer that does not answer is shown down at once, with the
error. Each round becomes a snapshot (``thinpeer.ops.ui.snapshot``) and a point of the time series;
readers wait for the next one (``wait``) instead of polling."""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from thinpeer.client import SuperPeerClient, ThinPeerError
from thinpeer.credentials import Credentials
from thinpeer.ops.ui import snapshot as snap

HISTORY_POINTS = 600  # ten minutes at one round a second
LATEST_RESULTS = 5


class Collector:
    def __init__(self, entry: str, credentials: Credentials | None = None, interval_s: float = 1.0,
                 timeout_s: float = 2.0, addresses: dict[str, str] | None = None) -> None:
        """``entry``: any super-peer (HOST:PORT); ``addresses``: where to reach super-peers when
        the backbone's own addresses are not reachable from here (containers)."""
        self.entry = entry
        self.credentials = credentials or Credentials.resolve()
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.overrides = dict(addresses or {})
        self.backbone: dict = {}
        self.error = ""  # why the backbone could not be read (the page says so)
        self._clients: dict[str, SuperPeerClient] = {}
        self._clients_lock = threading.Lock()  # the status readers run in parallel
        self._counters: snap.Counters | None = None
        self._snapshot: dict = {}
        self._history: deque[dict] = deque(maxlen=HISTORY_POINTS)
        self._version = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="ui-status")
        self._thread = threading.Thread(target=self._run, name="ui-collector", daemon=True)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "Collector":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        for client in self._clients.values():
            client.close()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # ------------------------------------------------------------------ reading

    def snapshot(self) -> tuple[int, dict]:
        with self._cond:
            return self._version, self._snapshot

    def history(self) -> list[dict]:
        with self._cond:
            return list(self._history)

    def wait(self, version: int, timeout_s: float) -> tuple[int, dict]:
        """The first snapshot newer than ``version`` (or the current one after ``timeout_s``)."""
        with self._cond:
            self._cond.wait_for(lambda: self._version > version or self._stop.is_set(), timeout=timeout_s)
            return self._version, self._snapshot

    def subscription(self, sid: str) -> dict | None:
        """One subscription in full: query, plan with the alternatives priced and rejected, and
        its latest results (a peek: the subscriber's offset is not moved)."""
        _, current = self.snapshot()
        summary = next((s for s in current.get("subscriptions", []) if s["id"] == sid), None)
        if summary is None:
            return None
        client = self._client(summary["superpeer"])
        try:
            status = client.status().get("subscriptions", {}).get(sid)
        except ThinPeerError as exc:
            return {**summary, "query": None, "plan": None, "latest": [], "latest_error": exc.message}
        if status is None:
            return None
        latest, error = [], ""
        results = status.get("results", 0)
        try:
            reply = client.read(sid, max(0, results - LATEST_RESULTS), LATEST_RESULTS, wait_ms=0, peek=True)
            latest = [{"offset": reply.offset + i, "item": item} for i, item in enumerate(reply.items)]
        except ThinPeerError as exc:
            error = exc.message
        return {**summary, "query": status.get("query"), "plan": status.get("plan"),
                "replay_from": status.get("replay_from"), "plan_history": status.get("plan_history") or [],
                "reoptimisation": status.get("reoptimisation") or "", "latest": latest, "latest_error": error}

    # ------------------------------------------------------------------ the rounds

    def _client(self, peer: str) -> SuperPeerClient:
        with self._clients_lock:
            client = self._clients.get(peer)
            if client is None:
                address = self.overrides.get(peer) or self._address(peer)
                client = self._clients[peer] = SuperPeerClient(address, timeout=self.timeout_s,
                                                               credentials=self.credentials)
            return client

    def _address(self, peer: str) -> str:
        for entry in self.backbone.get("superpeer", []):
            if entry["id"] == peer:
                return entry["address"]
        raise KeyError(peer)

    def _discover(self) -> None:
        """The backbone, from the entry super-peer (or, once known, from any that answers)."""
        candidates = [("", self.entry)] + [(p, self.overrides.get(p) or a) for p, a in
                                           ((e["id"], e["address"]) for e in self.backbone.get("superpeer", []))]
        errors = []
        for _, address in candidates:
            try:
                with SuperPeerClient(address, timeout=self.timeout_s, credentials=self.credentials) as client:
                    backbone = client.status().get("backbone")
            except ThinPeerError as exc:
                errors.append(f"{address}: {exc.code}: {exc.message}")
                continue
            if backbone:
                self.backbone, self.error = backbone, ""
                return
            errors.append(f"{address}: its status has no backbone (an older super-peer?)")
        self.error = "cannot read the backbone: " + "; ".join(errors)

    def _read(self, peer: str) -> snap.Reading:
        try:
            status = self._client(peer).status()
            return snap.Reading(peer, time.time(), status)
        except ThinPeerError as exc:
            return snap.Reading(peer, time.time(), None, f"{exc.code}: {exc.message}")
        except Exception as exc:  # noqa: BLE001 — a bad answer is shown, never ends the rounds
            return snap.Reading(peer, time.time(), None, f"{type(exc).__name__}: {exc}")

    def round(self) -> dict:
        """Read every super-peer once and publish the snapshot."""
        if not self.backbone:
            self._discover()
        peers = [e["id"] for e in self.backbone.get("superpeer", [])]
        readings = {r.peer: r for r in self._pool.map(self._read, peers)}
        current, self._counters = snap.build(self.backbone, readings, self._counters, self.entry)
        current["error"] = self.error
        point = {"at": current["at"],
                 "links": {link["id"]: link["bytes_per_s"] for link in current["links"]},
                 "utilisation": {p["id"]: p["utilisation"] for p in current["superpeers"]},
                 "cpu": {p["id"]: p["cpu_cores"] for p in current["superpeers"]},
                 "savings": current["savings"]}
        with self._cond:
            self._snapshot = current
            if readings:
                self._history.append(point)
            self._version += 1
            self._cond.notify_all()
        return current

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.round()
            except Exception as exc:  # noqa: BLE001 — the page says what went wrong, and we go on
                self.error = f"{type(exc).__name__}: {exc}"
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
