"""JSON forms of the optimizer's data model, for the wire between super-peers.

Properties, operators, stream entries, usage and statistics snapshots cross the network as JSON
text inside protobuf messages, so that the protocol carries the optimizer's own data model and
never a second copy of it. Every ``*_to_json`` has a ``*_from_json`` that returns an equal value.
"""

from __future__ import annotations

from fractions import Fraction
from lxml import etree

from wxquery.operators import definitions as alg
from wxquery.xml_safety import parse_untrusted

from .cost_model import Usage
from .network_state import NetworkStream
from .properties import (Aggregation, InputProperties, InputStream, Projection, Selection,
                         UnknownOperator)
from .statistics import ElementStats, StreamEstimate, StreamStatistics, Increment


def _frac(f: Fraction) -> str:
    return f"{f.numerator}/{f.denominator}"


def _unfrac(s: str) -> Fraction:
    return Fraction(s)


def atom_to_json(a: alg.Atom) -> list:
    """A string constant travels as ``{"string": …}`` (a number as "numerator/denominator")."""
    return [a.left, a.op, a.right, {"string": a.constant} if isinstance(a.constant, str) else _frac(a.constant)]


def atom_from_json(j: list) -> alg.Atom:
    c = j[3]
    return alg.Atom(j[0], j[1], j[2], c["string"] if isinstance(c, dict) else _unfrac(c))


def window_to_json(w: alg.WindowSpec | None) -> dict | None:
    if w is None:
        return None
    out = {"kind": w.kind, "size": _frac(w.size), "step": _frac(w.step), "ref": w.ref}
    if w.key is not None:
        out["key"] = w.key
    return out


def window_from_json(j: dict | None) -> alg.WindowSpec | None:
    if j is None:
        return None
    return alg.WindowSpec(j["kind"], _unfrac(j["size"]), _unfrac(j["step"]), j["ref"], j.get("key"))


def input_to_json(i: InputStream) -> dict:
    return {"stream": i.stream, "items": list(i.items)}


def input_from_json(j: dict) -> InputStream:
    return InputStream(j["stream"], tuple(j["items"]))


def properties_to_json(p: InputProperties) -> dict:
    return {
        "input": input_to_json(p.input),
        "variable": p.variable,
        "selection": [atom_to_json(a) for a in p.selection.atoms] if p.selection else None,
        "output": sorted(p.projection.output),
        "referenced": sorted(p.projection.referenced),
        "window": window_to_json(p.window),
        "aggregates": [[a.function, a.element] for a in p.aggregates],
        "aggregate_selection": ([atom_to_json(a) for a in p.aggregate_selection.atoms]
                                if p.aggregate_selection else None),
        "unknown": [[u.name, list(u.params)] for u in p.unknown],
        "sample": p.sample,
    }


def properties_from_json(j: dict) -> InputProperties:
    return InputProperties(
        input=input_from_json(j["input"]),
        variable=j["variable"],
        selection=Selection(tuple(atom_from_json(a) for a in j["selection"])) if j["selection"] else None,
        projection=Projection(frozenset(j["output"]), frozenset(j["referenced"])),
        window=window_from_json(j["window"]),
        aggregates=tuple(Aggregation(f, e) for f, e in j["aggregates"]),
        aggregate_selection=(Selection(tuple(atom_from_json(a) for a in j["aggregate_selection"]))
                             if j["aggregate_selection"] else None),
        unknown=tuple(UnknownOperator(n, tuple(p)) for n, p in j["unknown"]),
        sample=int(j.get("sample", 1)),
    )


def operator_to_json(op: alg.Operator) -> dict:
    if isinstance(op, alg.Sample):
        return {"op": "sample", "rate": op.rate}
    if isinstance(op, alg.Select):
        return {"op": "select", "atoms": [atom_to_json(a) for a in op.atoms]}
    if isinstance(op, alg.Project):
        return {"op": "project", "paths": sorted(op.paths)}
    if isinstance(op, alg.WindowAggregate):
        return {"op": "window", "window": window_to_json(op.window),
                "partials": [list(p) for p in op.partials]}
    if isinstance(op, alg.CombineWindows):
        return {"op": "combine", "source": window_to_json(op.source),
                "window": window_to_json(op.window), "partials": [list(p) for p in op.partials]}
    if isinstance(op, alg.AggregateFilter):
        return {"op": "aggregate-filter", "atoms": [atom_to_json(a) for a in op.atoms]}
    if isinstance(op, alg.BandJoin):
        return {"op": "band-join", "inner": op.inner, "outer_path": op.outer_path, "inner_path": op.inner_path,
                "low": _frac(op.low), "high": _frac(op.high), "keys": [atom_to_json(a) for a in op.keys]}
    raise TypeError(op)


def operator_from_json(j: dict) -> alg.Operator:
    kind = j["op"]
    if kind == "sample":
        return alg.Sample(int(j["rate"]))
    if kind == "select":
        return alg.Select(tuple(atom_from_json(a) for a in j["atoms"]))
    if kind == "project":
        return alg.Project(frozenset(j["paths"]))
    if kind == "window":
        return alg.WindowAggregate(window_from_json(j["window"]),  # type: ignore[arg-type]
                                   tuple(tuple(p) for p in j["partials"]))  # type: ignore[misc]
    if kind == "combine":
        return alg.CombineWindows(window_from_json(j["source"]), window_from_json(j["window"]),  # type: ignore[arg-type]
                                  tuple(tuple(p) for p in j["partials"]))  # type: ignore[misc]
    if kind == "aggregate-filter":
        return alg.AggregateFilter(tuple(atom_from_json(a) for a in j["atoms"]))
    if kind == "band-join":
        return alg.BandJoin(j["inner"], j["outer_path"], j["inner_path"], _unfrac(j["low"]), _unfrac(j["high"]),
                            tuple(atom_from_json(a) for a in j.get("keys", ())))
    raise ValueError(f"unknown operator {kind!r}")


def usage_to_json(u: Usage) -> dict:
    return {"links": [[sorted(k), v] for k, v in u.links.items()], "peers": u.peers}


def usage_from_json(j: dict) -> Usage:
    return Usage({frozenset(k): v for k, v in j["links"]}, dict(j["peers"]))


def stream_to_json(s: NetworkStream) -> dict:
    return {**stream_fixed_to_json(s), **stream_changing_to_json(s)}


def stream_from_json(j: dict) -> NetworkStream:
    return NetworkStream(**stream_fixed_from_json(j), **stream_changing_from_json(j))


def stream_fixed_to_json(s: NetworkStream) -> dict:
    """What never changes in a stream once installed (a stream widened in place is another
    value of it): what a lookup answer prints once per stream (``superpeer.rpc.stream_wire``)."""
    return {"id": s.id, "input": input_to_json(s.input), "properties": properties_to_json(s.properties),
            "kind": s.kind, "origin": s.origin, "parent": s.parent,
            "operators": [operator_to_json(o) for o in s.operators]}


def stream_changing_to_json(s: NetworkStream) -> dict:
    """What may change while a stream runs: its route, estimate, usage, users, replay state."""
    return {"route": list(s.route), "estimate": [s.estimate.freq, s.estimate.size], "usage": usage_to_json(s.usage),
            "users": sorted(s.users), "original": s.original, "past": s.past, "live_from": s.live_from}


def stream_fixed_from_json(j: dict) -> dict:
    """``NetworkStream``'s arguments of the fixed part (frozen values: streams may share them)."""
    return {"id": j["id"], "input": input_from_json(j["input"]), "properties": properties_from_json(j["properties"]),
            "kind": j["kind"], "origin": j["origin"], "parent": j["parent"],
            "operators": tuple(operator_from_json(o) for o in j["operators"])}


def stream_changing_from_json(j: dict) -> dict:
    return {"route": tuple(j["route"]), "estimate": StreamEstimate(*j["estimate"]), "usage": usage_from_json(j["usage"]),
            "users": set(j["users"]), "original": j["original"], "past": j.get("past", False),
            "live_from": j.get("live_from")}


def statistics_to_json(s: StreamStatistics, sample: int = 512, sample_of: int = 0) -> dict:
    """A snapshot: counters in full, the reservoir sample trimmed to ``sample`` items (printed
    once per refresh of the statistics' estimates: every registration asks for it) — unless
    the caller holds that sample already (``sample_of``: its ``sample_id``)."""
    values, texts, sample_id = s.sample_snapshot(sample, lambda i: etree.tostring(i, encoding="unicode",
                                                                                 with_tail=False))
    out = {
        "frequency": s.frequency, "items": s.items, "total_bytes": s.total_bytes,
        "elements": {p: [e.occurrences, e.total_bytes, e.items_with] for p, e in s.elements.items()},
        "increments": {p: [i.last, i.total, i.count, i.ordered] for p, i in s.increments.items()},
        # (a key of its own: a peer of an earlier version reads four values per increment)
        "increments_at": {p: i.last_index for p, i in s.increments.items() if i.last_index is not None},
        "sample_id": sample_id,
        "truncated_items": s.truncated_items,
    }
    if sample_of == sample_id:
        return {**out, "same_sample": True}
    return {**out, "sample": values, "sample_items": texts}


def statistics_from_json(j: dict, held: StreamStatistics | None = None) -> StreamStatistics:
    """``held``: the statistics an earlier answer gave, whose sample an answer with
    ``same_sample`` leaves out: they are brought up to date and returned (with the estimates
    they have computed)."""
    s = StreamStatistics(frequency=j["frequency"], items=j["items"], total_bytes=j["total_bytes"])
    s.elements = {p: ElementStats(*v) for p, v in j["elements"].items()}
    s.increments = {p: Increment(*v[:4]) for p, v in j["increments"].items()}
    for p, at in j.get("increments_at", {}).items():
        if p in s.increments:
            s.increments[p].last_index = at
    s.sample_id = int(j.get("sample_id", 0))
    s.truncated_items = int(j.get("truncated_items", 0))  # (absent from an earlier version's answer)
    if j.get("same_sample"):
        if held is None or held.sample_id != s.sample_id:
            raise ValueError("statistics without their sample, and no sample held")
        held.take_counters(s)
        return held
    s.sample = [dict(v) for v in j["sample"]]
    s.parse_sample_items = lambda: [parse_untrusted(x) for x in j["sample_items"]]  # (when needed)
    return s

