"""One super-peer: a thin façade that wires its parts and serves the gRPC services.

* ``peer_state.PeerState``: the stream property table (``sharing.stream_table``, shared with
  the simulator), the streams registered here, where subscriptions take their inputs;
* ``data_plane.DataPlane``: publish, validation, transfers, derived streams, delivery,
  forwarding;
* ``control_plane.ControlPlane``: stream and subscription registration, planning over a
  ``remote_view.RemotePlanningView`` fetched before the planner runs, the two-phase
  coordinator, unsubscribe;
* ``participant.Participant``: what this peer does when a plan is installed or removed
  (reserve, commit, abort, remove, truncate) and the tables and statistics it serves;
* ``peer_channels.GrpcPeerChannels``: calls to the other peers, forwarders, heartbeats.

Every public method raises ``NodeError`` with a gRPC status name and a message a person can act
on; nothing a thin peer or a neighbour sends can crash the daemon. Methods taking ``*_json``
arguments decode the wire forms of the super-peer RPCs.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from pathlib import Path

from sharing.properties import InputStream
from sharing.serialization import stream_from_json, stream_to_json
from sharing.stream_table import NetworkStream
from wxquery.operators.windows import WindowCounters

from .control.control_plane import ControlPlane
from .control.participant import PLAN_AGAIN, Participant
from .data.data_plane import DataPlane, Published
from .data.limits import DataLimits
from .errors import NodeError
from .executors import Executor, make_executor
from .history.archive.writer import Archiver, ArchiveSettings
from .history.bounds import HistoryBound, parse_history, pins_of
from .history.history_source import HistorySource
from .history.retention import ReplayHolds, Retention, log_replayer
from .history.state_store import StateStore
from .peer_state import PeerState
from .recovery.failure_detector import HeartbeatSettings
from .recovery.replanning import Recovery
from .recovery.restore import restore_originals, restore_subscriptions
from .rpc.peer_channels import (
    GrpcPeerChannels,
    Reserved,
    Waiting,
    commit_from_wire,
    input_from_wire,
    part_from_wire,
    waiting_to_wire,
)
from .security.audit import deny
from .security.peer_access import owner_of, stream_owner
from .security.tls import Security
from .subscriptions.record import SubscriptionRecord
from .subscriptions.results import ResultBuffer
from .topology import Topology

__all__ = ["Node", "NodeError", "SubscriptionRecord"]

LATE_ACTIVATION_S = 3.0
# A subscription the registering peer said it would activate (in registration order, so that
# later ones reuse earlier ones' streams) is activated here only if that has not happened by then.
ORDERED_ACTIVATION_S = 60.0
LOCAL_COMMIT_PIN_S = 10.0  # a plan committed here by this peer: its record holds the pins by then
WATERMARK_IDLE_S = 2.0  # a stream with an event time idle this long gets watermarks
log = logging.getLogger("streamglobe.superpeer")


class LocalPeer:
    """This peer as its own channels see it: calls to itself skip the network."""

    def __init__(self, participant: Participant, control: ControlPlane) -> None:
        self.participant = participant
        self.control = control

    def lookup(self, input_stream: InputStream) -> tuple[list[NetworkStream], dict]:
        return self.participant.lookup(input_stream)

    def statistics(self, name: str) -> dict:
        return self.participant.statistics(name)

    def announce(self, stream: NetworkStream) -> list[Waiting]:
        return self.control.announce(stream)

    def activate(self, subscription: str) -> tuple[bool, str]:
        return self.control.activate(subscription)

    def reserve(self, txn: str, streams: list[NetworkStream], subscription: str,
                target: str, version: int | None = None, attach: dict | None = None) -> Reserved:
        return self.participant.reserve_with_replays(txn, streams, subscription, target, version, attach)

    def commit(self, txn: str, subscription: str, lineage: list[str],
               replay: dict[str, int] | None = None, since: dict[str, float] | None = None) -> dict[str, dict]:
        return self.participant.commit(txn, subscription, lineage, replay, since)

    def abort(self, txn: str) -> bool:
        return self.participant.abort(txn)

    def remove(self, subscription: str) -> list[str]:
        return self.participant.remove(subscription)

    def truncate(self, stream: str, last: str) -> None:
        self.participant.truncate(stream, last)


class Node:
    def __init__(self, peer: str, topology: Topology, retention: int = 500_000,
                 executor: str = "inline", executor_options: dict | None = None,
                 limits: DataLimits | None = None, heartbeats: HeartbeatSettings | None = None,
                 state_dir: str | Path | None = None, watermark_idle_s: float = WATERMARK_IDLE_S,
                 security: Security | None = None, history: HistoryBound | None = None,
                 archive: ArchiveSettings | None = None, replay_rate: float = 0.0) -> None:
        """``state_dir``: where this peer keeps what survives a restart (``state_store``);
        None keeps it in memory. ``history``: how much of its past a stream registered here
        keeps unless registered with its own bound (``retention``); ``archive``: persist the
        streams registered here as Parquet (``archive``); ``replay_rate``: items/s a replay of
        the past sends at most (0: as fast as the links take them, ``log_replay``)."""
        if peer not in topology.backbone.peers:
            raise NodeError("INVALID_ARGUMENT", f"{peer} is not a super-peer of the topology")
        try:
            self.executor: Executor = make_executor(executor, peer, **(executor_options or {}))
        except ValueError as exc:
            raise NodeError("UNIMPLEMENTED", str(exc)) from None
        self.id = peer
        self.topology = topology
        self.watermark_idle_s = watermark_idle_s
        try:
            store = StateStore(state_dir)
        except (OSError, sqlite3.Error) as exc:
            raise NodeError("FAILED_PRECONDITION", f"cannot use the state directory {state_dir}: {exc}") from None
        self.state = PeerState(peer, topology.backbone, limits, store)
        restored_streams = restore_originals(self.state)
        self.channels = GrpcPeerChannels(peer, topology, heartbeats=heartbeats, security=security)
        self.data = DataPlane(self.state, self.executor, self.channels.forwarder)
        self.archiver = (Archiver(self.state, archive.directory, archive.span, archive.samples)
                         if archive is not None else None)
        self.data.replays.rate = max(replay_rate, 0.0)
        self.data.replays.history = HistorySource(store, archive.directory if archive is not None else None)
        self.retention = Retention(self.state, history, self.data.replays.history)
        self.participant = Participant(self.state, self.executor, self.channels, self.data.attach,
                                       replay=log_replayer(self.retention, self.data.replay), removed=self._removed,
                                       positions=self.data.positions,
                                       replays=ReplayHolds(self.retention, self.data.replays))
        self.control = ControlPlane(self.state, self.channels, retention)
        self.control.positions = self.data.positions
        self.channels.local = LocalPeer(self.participant, self.control)
        self.control.incarnation = self.channels.detector.incarnation
        self.recovery = Recovery(self.control, self.channels.detector)
        self.holders: dict[str, tuple[str | None, str]] = {}  # txn -> who a replay is held here for (``reserve``)
        restored_subscriptions = restore_subscriptions(self.control, self.recovery)
        if restored_streams or restored_subscriptions:
            log.warning("%s restored %d streams and %d subscriptions from %s", peer, restored_streams,
                        restored_subscriptions, store.path)
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, name=f"hb-{peer}", daemon=True)

    def _removed(self, stream: str) -> None:
        """A stream removed here (under the lock): its queued items and its numbering go."""
        self.channels.discard(stream)
        self.data.positions.forget(stream)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self.archiver is not None:
            self.archiver.start()
        self.recovery.start()
        self._heartbeat.start()

    def stop(self) -> None:
        self.recovery.stop()
        self.channels.stop()
        self.control.stop()
        self.executor.stop()
        if self.archiver is not None:
            self.archiver.stop()

    # ------------------------------------------------------------------ thin peers

    def register_stream(self, name: str, root: str, item: str, rate: float, event_time: str = "",
                        event_time_rate: float = 1.0, publisher: str = "", history: str = "") -> str:
        """Returns the history bound the stream is kept with (``retention``)."""
        try:
            parse_history(history)
        except ValueError as exc:
            raise NodeError("INVALID_ARGUMENT", str(exc)) from None
        self.control.register_stream(name, root, item, rate, event_time, event_time_rate, publisher)
        with self.state.lock:
            return self.retention.set_bound(name, history)

    def publish(self, name: str, items: list[str] | list[bytes], first: int | None = None,
                position: int | None = None) -> Published:
        return self.data.publish(name, items, first, position)

    def close_stream(self, name: str) -> int:
        return self.data.close_stream(name)

    def subscribe(self, query: str, strategy: str = "sharing",
                  wait_for_streams: bool = False, **request) -> SubscriptionRecord:
        return self.control.subscribe(query, strategy, wait_for_streams, **request)

    def unsubscribe(self, sid: str) -> list[str]:
        return self.control.unsubscribe(sid)

    def read_results(self, sid: str, offset: int, max_items: int, wait_s: float, peek: bool = False
                     ) -> tuple[ResultBuffer, tuple[int, list[str], bool, int]]:
        return self.control.read_results(sid, offset, max_items, wait_s, peek)

    # ------------------------------------------------------------------ super-peers

    def transfer(self, stream: str, items: list[str], end: bool, sender: str = "", epoch: str = "",
                 first: int | None = None, watermark: tuple[str, float] | None = None) -> int:
        return self.data.transfer(stream, items, end, sender, epoch, first, watermark)

    def lookup(self, input_json: str) -> tuple[str, str]:
        streams, usage = self.participant.lookup(input_from_wire(input_json))
        return json.dumps([stream_to_json(s) for s in streams]), json.dumps(usage)

    def statistics_json(self, name: str) -> str:
        return json.dumps(self.participant.statistics(name))

    def announce(self, stream_json: str, caller: str | None = None) -> str:
        """A stream registered at ``caller`` (its certified id; None on an insecure network):
        a super-peer announces the streams registered there, and nothing else."""
        stream = stream_from_json(json.loads(stream_json))
        if (not stream.original or stream.parent is not None or stream.route != (stream.origin,)
                or stream.origin not in self.state.backbone.peers or (caller is not None and stream.origin != caller)):
            raise deny(caller or "", f"AnnounceStream {stream.id!r}", f"{caller or 'a peer'} may announce only a "
                                                                       f"stream registered there, not {stream.id!r} "
                                                                       f"at {stream.origin}")
        return waiting_to_wire(self.control.announce(stream))

    def activate(self, sid: str) -> tuple[bool, str]:
        return self.control.activate(sid)

    def reserve(self, txn: str, part_json: str, caller: str | None = None) -> Reserved:
        """A plan's streams, reserved for the peer that planned it (``caller``: its certified id;
        None on an insecure network): it reserves for its own subscriptions, with stream ids
        from its own range."""
        streams, subscription, target, version, attach = part_from_wire(part_json)
        if caller is not None and (target != caller or owner_of(subscription) != caller
                                   or any(stream_owner(s.id) != caller for s in streams)):
            raise deny(caller, f"Reserve for {subscription}", f"{caller} may reserve only for its own "
                                                              f"subscriptions ({caller}-…) and streams ({caller}.…)")
        parents = {s.id: s.parent for s in streams}
        wrong = sorted(new for new, spec in attach.items() if parents.get(new) != spec["copy"])
        if wrong:  # (a replay is held only for a new copy of it the plan installs)
            raise deny(caller or subscription, f"Reserve for {subscription}", f"{wrong[0]} is not a new copy "
                       f"of {attach[wrong[0]]['copy']} in the plan", "INVALID_ARGUMENT")
        got = self.participant.reserve_with_replays(txn, streams, subscription, target, version, attach)
        if got.ok:
            self.state.reserved_by[txn] = (caller, subscription)
            if got.starts:  # (held past the commit: only its coordinator lets it go)
                self.holders[txn] = (caller, subscription)
        return got

    def commit(self, txn: str, commit_json: str, caller: str | None = None) -> tuple[str, str]:
        """(where the plan starts in the streams registered here, this process's incarnation).
        Only the peer that planned a subscription commits it (and what it reserved); a lease
        that expired is refused, not committed empty."""
        subscription, lineage, replay, since = commit_from_wire(commit_json)
        self._check_txn(txn, caller, subscription, "Commit")
        self.state.held()  # (the reservations past their time are let go now, not at the next look)
        if txn in self.state.expired:
            raise NodeError("FAILED_PRECONDITION", f"the reservation {txn} expired at {self.id} "
                                                   f"before it was committed{PLAN_AGAIN}")
        return json.dumps(self.participant.commit(txn, subscription, lineage, replay, since)), self.channels.epoch

    def abort(self, txn: str, caller: str | None = None) -> bool:
        """Whether a replay ``txn`` held here had been let go before (``Participant.abort``)."""
        held = self.state.reserved_by.get(txn) or self.holders.get(txn)
        self._check_txn(txn, caller, held[1] if held else f"{caller}-", "Abort")
        self.holders.pop(txn, None)
        return self.participant.abort(txn)

    def _check_txn(self, txn: str, caller: str | None, subscription: str, what: str) -> None:
        if caller is None:
            return
        held = self.state.reserved_by.get(txn)
        if owner_of(subscription) != caller or (held is not None and held != (caller, subscription)):
            raise deny(caller, f"{what} {txn} for {subscription}", f"{caller} may {what.lower()} only "
                                                                   "its own subscriptions' transactions")

    def remove(self, sid: str) -> list[str]:
        return self.participant.remove(sid)

    def truncate(self, stream: str, peer: str) -> None:
        self.participant.truncate(stream, peer)

    # ------------------------------------------------------------------ heartbeats

    def _heartbeat_loop(self) -> None:
        while not self.channels.wait_stopped(self.channels.detector.settings.interval_s):
            try:
                self.heartbeat_once()
            except Exception:  # noqa: BLE001 - failure detection must go on, whatever failed
                log.exception("%s: a heartbeat round failed", self.id)

    def heartbeat_once(self) -> None:
        """Hear from every peer (usage, originals registered there); then install the
        subscriptions whose announcement was missed (their stream's peer was down)."""
        started = time.time()
        for peer, (usage, originals, pins) in self.channels.heartbeat_round(list(self.state.backbone.peers)).items():
            if usage:
                self.state.peer_usage[peer] = usage
            self.state.peer_pins[peer] = pins
            self.state.round_heard[peer] = started  # its pins are those of a reply made after this
            with self.state.lock:
                for s in originals:  # (a peer speaks for the streams registered there only)
                    if s.origin == peer and s.original and s.id not in self.state.known_originals:
                        self.state.known_originals[s.id] = s
                        self.state.heard_of[s.id] = time.time()
        self.recovery.after_heartbeat()
        self.data.idle_watermarks(self.watermark_idle_s)
        try:
            self.trim_history()
        except Exception:  # noqa: BLE001 - the late activations below must still run
            log.exception("%s: trimming the history failed", self.id)
        now = time.time()
        for record in self.control.ready_waiting(older_than=now - LATE_ACTIVATION_S):
            if now - self.control.announced.get(record.runtime.id, 0.0) < ORDERED_ACTIVATION_S:
                continue  # the stream's super-peer activates it, after those registered before it
            if any(now - self.state.heard_of.get(n, 0.0) < LATE_ACTIVATION_S for n in record.waiting_for):
                continue  # (a heartbeat told of the stream just now: its announcement is on its way)
            self.control.activate(record.runtime.id)

    def trim_history(self) -> None:
        """Trim the logs of the streams registered here to their history bounds, keeping what
        any peer's subscriptions may still replay (``history``)."""
        others = [p for p in self.state.backbone.peers if p != self.id]
        trimmed = self.retention.trim(self._pins, {p: self.state.peer_pins.get(p) for p in others})
        for name, n in trimmed.items():
            log.info("%s: trimmed %d items of %s's log (history %s)", self.id, n, name,
                     self.retention.bound(self.state.originals[name]))

    def _pins(self) -> tuple[dict[str, int], dict[str, list[int]]]:
        """(with the lock held) The first item of each stream registered here that something
        here may still read: this peer's subscriptions, plans committed here whose subscriber's
        peer has not been heard since, the archive's next item; and the copies being filled."""
        own = pins_of(self.control.subscriptions.values())
        now = time.time()
        for sid, (at, pins) in list(self.state.commit_pins.items()):
            peer = sid.split("~", 1)[0].rsplit("-", 1)[0]
            if (self.state.round_heard.get(peer, 0.0) > at) or (peer == self.id and now - at > LOCAL_COMMIT_PIN_S):
                del self.state.commit_pins[sid]
                continue
            for name, start in pins.items():
                own[name] = min(own.get(name, start), start)
        if self.archiver is not None:  # what is not archived yet stays in the log
            for name in self.state.originals:
                at = self.archiver.position(name)
                own[name] = min(own.get(name, at), at)
        return own, self.data.replaying()

    def heartbeat_reply(self) -> tuple[str, str, list[str], str, str]:
        """(usage, originals registered here, the peers this one hears, this process's
        incarnation, the first item of each stream the subscriptions here may replay)."""
        with self.state.lock:
            originals = [stream_to_json(s) for n in self.state.originals
                         if (s := self.state.table.get(n)) is not None]
            pins = pins_of(self.control.subscriptions.values())
        return (json.dumps(self.state.own_usage().to_json(self.id)), json.dumps(originals),
                self.channels.detector.hearing(), self.channels.epoch, json.dumps(pins))

    # ------------------------------------------------------------------ status

    def status(self) -> dict:
        state = self.state
        dropped = self.executor.window_counters()  # before the state lock: the executor has its own
        with state.lock:
            return {
                "superpeer": self.id,
                "address": self.topology.address(self.id),
                "backbone": self.topology.to_mapping(),
                "streams_registered_here": {
                    n: {"root": s.root, "item": s.item, "accepted": s.accepted,
                        "rejected": s.rejected, "closed": s.closed, "next_position": s.next_position,
                        "duplicates": s.duplicates, "logged": s.logged,
                        "history": self.retention.status(s),
                        "event_time": s.event_time.status() if s.event_time else None,
                        "statistics": {"items_observed": s.statistics.items,
                                       "avg_item_size": round(s.statistics.avg_item_size, 1),
                                       "frequency": round(s.statistics.frequency, 3)}}
                    for n, s in state.originals.items()},
                "stream_table": [{**stream_status(s, self.id), "derived_here": state.derived_here(s.id)}
                                 for s in state.table],
                "operators": [{"stream": sid, "parent": entry.parent,
                               "operators": [str(o) for o in entry.operators] or ["forward"],
                               **window_drops(dropped.get(sid))}
                              for sid in self.executor.installed()
                              if (entry := state.table.get(sid)) is not None],
                "state_dir": str(state.store.path.parent) if state.store.path else None,
                "executor": self.executor.name,
                "executor_status": self.executor.status(),
                "subscriptions": self.control.status(),
                "links": self.channels.status()["links"],
                "load": state.own_usage().to_json(self.id),
                "process_cpu_seconds": time.process_time(),
                "unreachable_peers": self.channels.status()["unreachable_peers"],
                "peers_last_heard_s_ago": self.channels.status()["peers_last_heard_s_ago"],
                "failure_detector": self.channels.status()["failure_detector"],
                "archive": self.archiver.status() if self.archiver is not None else None,
                **self.data.status(),
            }


def window_drops(counters: WindowCounters | None) -> dict:
    """What a window operator dropped (late, or without a numeric reference): never silent."""
    if counters is None:
        return {}
    return {"late_items": counters.late_items, "missing_reference": counters.missing_reference}


def stream_status(s: NetworkStream, here: str) -> dict:
    """One entry of the stream property table as ``status`` shows it."""
    return {"id": s.id, "input": s.input.stream, "original": s.original, "kind": s.kind,
            "origin": s.origin, "parent": s.parent, "route": list(s.route),
            "next_hops": s.next_hops(here),
            "operators": [str(o) for o in s.operators],
            "selection": [str(a) for a in s.properties.selection.atoms] if s.properties.selection else [],
            "projection": sorted(s.properties.projection.output),
            "window": str(s.properties.window) if s.properties.window else None,
            "aggregates": [a.name for a in s.properties.aggregates],
            "sample": s.properties.sample,
            "bits_per_s": round(s.estimate.bits_per_second, 1),
            "users": sorted(s.users)}
