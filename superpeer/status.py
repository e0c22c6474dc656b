"""What ``status`` shows of one super-peer: every part's own account, as one JSON object."""

from __future__ import annotations

import os
import time
from typing import Protocol

from sharing.stream_table import NetworkStream
from wxquery.operators.windows import WindowCounters

from .control.control_plane import ControlPlane
from .data.data_plane import DataPlane
from .executors import Executor
from .history.archive.writer import Archiver
from .history.retention import Retention
from .peer_state import PeerState
from .topology import Topology


class TransportStatus(Protocol):
    def status(self) -> dict: ...


def report(state: PeerState, topology: Topology, executor: Executor, control: ControlPlane, data: DataPlane,
           retention: Retention, transport: TransportStatus, archiver: Archiver | None) -> dict:
    """The peer's streams, operators, routes, subscriptions, per-link traffic and load."""
    dropped = executor.window_counters()  # before the state lock: the executor has its own
    links = transport.status()
    with state.lock:
        return {
            "superpeer": state.id,
            "address": topology.address(state.id),
            "backbone": topology.to_mapping(),
            "streams_registered_here": {
                n: {"root": s.root, "item": s.item, "accepted": s.accepted,
                    "rejected": s.rejected, "closed": s.closed, "next_position": s.next_position,
                    "duplicates": s.duplicates, "logged": s.logged,
                    "history": retention.status(s),
                    "event_time": s.event_time.status() if s.event_time else None,
                    "statistics": {"items_observed": s.statistics.items,
                                   "avg_item_size": round(s.statistics.avg_item_size, 1),
                                   "frequency": round(s.statistics.frequency, 3)}}
                for n, s in state.originals.items()},
            "stream_table": [{**stream_status(s, state.id), "derived_here": state.derived_here(s.id),
                              "held_for_widening": s.id in state.held_for_widening}
                             for s in state.table],
            "operators": [{"stream": sid, "parent": entry.parent,
                           "operators": [str(o) for o in entry.operators] or ["forward"],
                           **window_drops(dropped.get(sid))}
                          for sid in executor.installed()
                          if (entry := state.table.get(sid)) is not None],
            "state_dir": str(state.store.path.parent) if state.store.path else None,
            "executor": executor.name,
            "executor_status": executor.status(),
            "subscriptions": control.status(),
            "links": links["links"],
            "load": state.usage_report(),
            "process_cpu_seconds": time.process_time(),
            "process_rss_bytes": resident_bytes(),
            "unreachable_peers": links["unreachable_peers"],
            "peers_last_heard_s_ago": links["peers_last_heard_s_ago"],
            "failure_detector": links["failure_detector"],
            "cut_links": links.get("cut_links", []),
            "archive": archiver.status() if archiver is not None else None,
            **data.status(),
        }


def resident_bytes() -> int | None:
    """The daemon's resident memory now (Linux; None elsewhere): what a bound on queues holds."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


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
