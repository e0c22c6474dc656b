"""The network as the web view shows it: one snapshot built from every super-peer's ``status``.

Pure (no I/O): ``thinpeer.ops.ui.collector`` reads the statuses; this module turns them, and the
snapshot before, into what a person looks at — the backbone with each peer's load ``u_l(v)``
against its capacity ``l(v)`` and each link's ``u_b(e)`` against its bandwidth, every stream
along its route with its properties, the subscriptions, the faults, and what sharing saves
against data shipping (the cost model's figure and the measured one). Rates (bytes/s, cores)
are differences of the super-peers' counters between two snapshots.

The same dictionary is the JSON API (``/api/network``) and what the page draws: one shape,
documented in the README."""

from __future__ import annotations

from dataclasses import dataclass, field

from sharing.backbone import Backbone, TopologyError


@dataclass(frozen=True)
class Reading:
    """One super-peer's ``status`` at ``at`` (epoch seconds), or why there is none."""

    peer: str
    at: float
    status: dict | None = None
    error: str = ""


@dataclass
class Counters:
    """Cumulative counters of the snapshot before: rates are differences of these."""

    at: dict[str, float] = field(default_factory=dict)  # per peer: when it was read
    link_bytes: dict[str, int] = field(default_factory=dict)  # "A->B" (sender's count)
    link_items: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # process CPU seconds per peer
    accepted: dict[str, int] = field(default_factory=dict)  # items accepted per original stream


def link_id(a: str, b: str) -> str:
    return "–".join(sorted((a, b)))


def build(backbone: dict, readings: dict[str, Reading], before: Counters | None, entry: str = ""
          ) -> tuple[dict, Counters]:
    """The snapshot of the network, and the counters the next one takes rates against."""
    before = before or Counters()
    now = Counters()
    peers = [_peer(p, readings.get(p["id"]), before, now) for p in backbone.get("superpeer", [])]
    up = {p["id"] for p in peers if p["up"]}
    statuses = {r.peer: r.status for r in readings.values() if r.status is not None}
    links = [_link(link, statuses, up, before, now) for link in backbone.get("link", [])]
    streams = _streams(statuses)
    subscriptions = _subscriptions(statuses, streams)
    _serve(streams, subscriptions)
    originals = _originals(statuses, before, now)
    user = next((s.get("user") for s in statuses.values() if s.get("user")), None)
    snapshot = {
        "entry": entry,
        "at": max((r.at for r in readings.values()), default=0.0),
        "user": user,
        "superpeers": peers,
        "links": links,
        "streams": list(streams.values()),
        "subscriptions": list(subscriptions.values()),
        "originals": originals,
        "faults": _faults(peers, links, subscriptions, statuses),
        "savings": _savings(backbone, links, streams, subscriptions, originals),
    }
    return snapshot, now


def _rate(now_value: float, before_value: float | None, dt: float) -> float | None:
    if before_value is None or dt <= 0 or now_value < before_value:  # a restart resets counters
        return None
    return (now_value - before_value) / dt


def _peer(entry: dict, reading: Reading | None, before: Counters, now: Counters) -> dict:
    pid = entry["id"]
    status = reading.status if reading else None
    out = {"id": pid, "address": entry.get("address", ""), "position": entry.get("position"),
           "capacity": entry.get("load_capacity", 1.0), "up": status is not None,
           "error": (reading.error if reading else "not read yet"),
           "load": None, "utilisation": None, "cpu_cores": None, "executor": None,
           "subscriptions": 0, "operators": 0, "down_peers": {}}
    if status is None:
        return out
    now.at[pid] = reading.at
    load = (status.get("load") or {}).get("load")
    executor = status.get("executor")
    starting = (status.get("executor_status") or {}).get("state")
    if executor and starting not in (None, "ready"):
        executor = f"{executor} ({starting})"  # a Spark session still starting: operators wait
    out.update(error="", load=load,
               utilisation=None if load is None else load / max(out["capacity"], 1e-9),
               executor=executor, subscriptions=len(status.get("subscriptions") or {}),
               operators=len(status.get("operators") or []))
    cpu = status.get("process_cpu_seconds")
    if cpu is not None:
        now.cpu[pid] = cpu
        out["cpu_cores"] = _rate(cpu, before.cpu.get(pid), reading.at - before.at.get(pid, reading.at))
    detector = (status.get("failure_detector") or {}).get("peers") or {}
    out["down_peers"] = {p: d.get("reason", d.get("state")) for p, d in detector.items()
                         if d.get("state") in ("down", "unreachable")}
    return out


def _link(link: dict, statuses: dict[str, dict], up: set[str], before: Counters, now: Counters) -> dict:
    a, b = link["a"], link["b"]
    out = {"id": link_id(a, b), "a": a, "b": b, "bandwidth": link["bandwidth"],
           "used_bits": 0.0, "utilisation": 0.0, "bytes_per_s": 0.0, "items_per_s": 0.0,
           "bytes": 0, "state": "up", "reason": ""}
    measured = False
    for sender, receiver in ((a, b), (b, a)):
        status = statuses.get(sender)
        if status is None:
            continue
        out["used_bits"] += ((status.get("load") or {}).get("links") or {}).get(receiver, 0.0)
        counter = (status.get("links") or {}).get(f"{sender}->{receiver}")
        if counter is None:
            continue
        key = f"{sender}->{receiver}"
        now.link_bytes[key], now.link_items[key] = counter.get("bytes", 0), counter.get("items", 0)
        out["bytes"] += counter.get("bytes", 0)
        out["held_bytes"] = out.get("held_bytes", 0) + counter.get("held_bytes", 0)
        if counter.get("pressure"):
            out["pressure"] = f"{receiver} holds back {sender}'s batches: {counter['pressure']}"
        dt = now.at.get(sender, 0.0) - before.at.get(sender, now.at.get(sender, 0.0))
        rate = _rate(counter.get("bytes", 0), before.link_bytes.get(key), dt)
        items = _rate(counter.get("items", 0), before.link_items.get(key), dt)
        if rate is not None:
            out["bytes_per_s"] += rate
            out["items_per_s"] += items or 0.0
            measured = True
    if not measured and not (a in now.at and b in now.at and before.at.get(a) and before.at.get(b)):
        out["bytes_per_s"] = out["items_per_s"] = None  # not read twice yet: no rate to tell
    out["utilisation"] = out["used_bits"] / max(out["bandwidth"], 1e-9)
    if a not in up or b not in up:
        out["state"], out["reason"] = "down", f"{' and '.join(p for p in (a, b) if p not in up)} down"
    else:
        for me, other in ((a, b), (b, a)):
            seen = (((statuses[me].get("failure_detector") or {}).get("links") or {})
                    .get(f"{me}–{other}") or {})
            if seen.get("state") == "down":
                out["state"], out["reason"] = "down", seen.get("reason", "")
    return out


def _streams(statuses: dict[str, dict]) -> dict[str, dict]:
    """Every stream any reachable super-peer knows (its route is the same at all of them)."""
    streams: dict[str, dict] = {}
    for status in statuses.values():
        for s in status.get("stream_table") or []:
            known = streams.get(s["id"])
            if known is None:
                streams[s["id"]] = known = {k: v for k, v in s.items() if k not in ("next_hops", "derived_here")}
                known["users"] = set(s.get("users") or [])
                known["hops"] = [[x, y] for x, y in zip(s["route"], s["route"][1:])]
                known["derived_at"] = s["origin"] if s.get("parent") else None
                known["subscriptions"] = []
            else:
                known["users"] |= set(s.get("users") or [])
    for s in streams.values():
        s["users"] = sorted(s["users"])
    return streams


def _subscriptions(statuses: dict[str, dict], streams: dict[str, dict]) -> dict[str, dict]:
    subscriptions = {}
    for peer, status in statuses.items():
        for sid, sub in (status.get("subscriptions") or {}).items():
            plan = sub.get("plan") or {}
            parts = plan.get("parts") or []
            subscriptions[sid] = {
                "id": sid, "superpeer": peer, "user": sub.get("user"), "strategy": sub.get("strategy"),
                "inputs": sub.get("inputs"), "health": sub.get("health"), "sample": sub.get("sample", 1),
                "results": sub.get("results", 0), "delivered": sub.get("delivered", 0),
                "closed": sub.get("closed", False), "error": sub.get("error") or sub.get("plan_error"),
                "waiting_for": sub.get("waiting_for") or [],
                "past": sub.get("past") or {},  # over the past: how far its replay has come, per stream
                "admitted": plan.get("admitted"), "cost": plan.get("cost"),
                "routes": [p.get("route") for p in parts],
                "delivered_streams": [p.get("delivered_stream") for p in parts],
                "reused_streams": [p.get("reused_stream") for p in parts],
                "input_streams": [p.get("input") for p in parts],
                "streams": [],
            }
    return subscriptions


def _serve(streams: dict[str, dict], subscriptions: dict[str, dict]) -> None:
    """Which subscriptions each stream serves (users are plan ids: ``sid`` or ``sid~…``)."""
    for s in streams.values():
        served = sorted({u.split("~", 1)[0] for u in s["users"]})
        s["subscriptions"] = served
        for sid in served:
            if sid in subscriptions:
                subscriptions[sid]["streams"].append(s["id"])


def _originals(statuses: dict[str, dict], before: Counters, now: Counters) -> dict[str, dict]:
    """Each registered stream at its super-peer: items accepted and the measured input rate."""
    out = {}
    for peer, status in statuses.items():
        at = now.at.get(peer, 0.0)
        for name, s in (status.get("streams_registered_here") or {}).items():
            key = f"{peer}/{name}"
            accepted = s.get("accepted", 0)
            now.accepted[key] = accepted
            size = ((s.get("statistics") or {}).get("avg_item_size") or 0.0)
            items = _rate(accepted, before.accepted.get(key), at - before.at.get(peer, at))
            out[name] = {"superpeer": peer, "accepted": accepted, "avg_item_size": size,
                         "closed": s.get("closed", False), "items_per_s": items,
                         "bytes_per_s": None if items is None else items * size}
    return out


def _faults(peers: list[dict], links: list[dict], subscriptions: dict[str, dict],
            statuses: dict[str, dict]) -> list[dict]:
    faults = []
    for p in peers:
        if not p["up"]:
            seen = sorted(q["id"] for q in peers if p["id"] in q.get("down_peers", {}))
            reason = p["error"] + (f"; also reported down by {', '.join(seen)}" if seen else "")
            faults.append({"kind": "superpeer down", "superpeer": p["id"], "reason": reason})
        else:
            for other, why in p.get("down_peers", {}).items():
                if all(q["id"] != other or q["up"] for q in peers):
                    faults.append({"kind": "unreachable", "superpeer": other,
                                   "reason": f"{p['id']} cannot reach it: {why}"})
    for link in links:
        if link["state"] == "down" and link["a"] not in {f.get("superpeer") for f in faults} \
                and link["b"] not in {f.get("superpeer") for f in faults}:
            faults.append({"kind": "link cut", "link": link["id"], "reason": link["reason"]})
    for peer, status in sorted(statuses.items()):  # back-pressure: where it comes from
        for stream, held in sorted(((status.get("backpressure") or {}).get("streams") or {}).items()):
            if held.get("waiting"):
                faults.append({"kind": "back-pressure", "superpeer": peer, "stream": stream,
                               "reason": held.get("reason", "")})
    for sub in subscriptions.values():
        health = sub.get("health") or {}
        if health.get("state") == "degraded":
            faults.append({"kind": "subscription degraded", "subscription": sub["id"],
                           "reason": health.get("reason", "")})
        elif sub.get("error"):
            faults.append({"kind": "subscription failed", "subscription": sub["id"], "reason": sub["error"]})
    return faults


def _hops(backbone: Backbone | None, a: str, b: str) -> int:
    if backbone is None:
        return 0
    try:
        return len(backbone.route(a, b)) - 1
    except TopologyError:
        return 0


def _savings(backbone: dict, links: list[dict], streams: dict[str, dict], subscriptions: dict[str, dict],
             originals: dict[str, dict]) -> dict:
    """Bandwidth the current subscriptions take with sharing against data shipping (every
    subscription fed its input's whole original stream along the shortest route): the cost
    model's estimates (bit/s), and the same measured (bytes/s on the links against the inputs'
    measured rates times the hops data shipping would take)."""
    try:
        graph = Backbone.from_mapping(backbone)
    except (TopologyError, ValueError, TypeError):
        graph = None
    by_name = {s["input"]: s for s in streams.values() if s.get("original")}
    model_sharing = sum(s.get("bits_per_s", 0.0) * max(0, len(s["route"]) - 1)
                        for s in streams.values() if not s.get("original"))
    model_shipping = measured_shipping = 0.0
    measured = True
    for sub in subscriptions.values():
        for name in sub["input_streams"]:
            original = by_name.get(name)
            if original is None:
                continue
            hops = _hops(graph, original["origin"], sub["superpeer"])
            model_shipping += original.get("bits_per_s", 0.0) * hops
            rate = (originals.get(name) or {}).get("bytes_per_s")
            if rate is None:
                measured = False
            else:
                measured_shipping += rate * hops
    rates = [link["bytes_per_s"] for link in links if link["bytes_per_s"] is not None]
    measured_sharing = sum(rates) if rates else None

    def saving(sharing: float | None, shipping: float | None) -> float | None:
        if sharing is None or shipping is None or shipping <= 0:
            return None
        return 1.0 - sharing / shipping

    shipped = measured_shipping if measured else None
    return {"model": {"sharing_bits_per_s": model_sharing, "data_shipping_bits_per_s": model_shipping,
                      "saving": saving(model_sharing, model_shipping)},
            "measured": {"sharing_bytes_per_s": measured_sharing, "data_shipping_bytes_per_s": shipped,
                         "saving": saving(measured_sharing, shipped)}}
