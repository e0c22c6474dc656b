"""The super-peer RPCs' payloads: JSON inside protobuf messages, to and from the control
plane's own types (``control.peer_link``)."""

from __future__ import annotations

import json

from sharing.properties import InputStream
from sharing.serialization import input_from_json, stream_from_json, stream_to_json
from sharing.stream_table import NetworkStream

from ..control.peer_link import Waiting


def input_to_wire(input_stream: InputStream) -> str:
    return json.dumps({"stream": input_stream.stream, "items": list(input_stream.items)})


def input_from_wire(text: str) -> InputStream:
    return input_from_json(json.loads(text))


def part_to_wire(streams: list[NetworkStream], subscription: str, target: str,
                 version: int | None = None, attach: dict | None = None, pins: list[str] | None = None) -> str:
    return json.dumps({"streams": [stream_to_json(s) for s in streams],
                       "subscription": subscription, "target": target, "version": version,
                       **({"attach": attach} if attach else {}), **({"pins": pins} if pins else {})})


def part_from_wire(text: str) -> tuple[list[NetworkStream], str, str, int | None, dict, list[str]]:
    """(streams, subscription, target, the peer's version the plan was made over, if known,
    the new copies of running replays: new copy -> {"copy": running copy, "since_s": seconds
    or None for everything retained}, the reused streams to keep there until the transaction ends)."""
    part = json.loads(text)
    version = part.get("version")
    attach = {str(k): {"copy": str(v["copy"]), "since_s": None if v.get("since_s") is None else float(v["since_s"])}
              for k, v in (part.get("attach") or {}).items()}
    return ([stream_from_json(j) for j in part["streams"]], part["subscription"], part["target"],
            int(version) if version is not None else None, attach, [str(p) for p in part.get("pins") or ()])


def commit_to_wire(subscription: str, lineage: list[str], replay: dict[str, int] | None = None,
                   since: dict[str, float] | None = None, held: list[str] | None = None) -> str:
    return json.dumps({"subscription": subscription, "lineage": lineage, "replay": replay or {},
                       "since": since or {}, "held": held or []})


def commit_from_wire(text: str) -> tuple[str, list[str], dict[str, int], dict[str, float], list[str]]:
    """(subscription, reused streams and ancestors, new copies to fill from their stream's log
    and from which item, those of them to fill from the items of the last so many seconds, new
    count windows to install held: ``control.count_handover``)."""
    info = json.loads(text)
    return (info["subscription"], list(info["lineage"]), {k: int(v) for k, v in info.get("replay", {}).items()},
            {k: float(v) for k, v in info.get("since", {}).items()}, [str(s) for s in info.get("held", [])])


def waiting_to_wire(waiting: list[Waiting]) -> str:
    return json.dumps([{"subscription": w.subscription, "registered_at": w.registered_at}
                       for w in waiting])


def waiting_from_wire(text: str) -> list[Waiting]:
    return [Waiting(w["subscription"], w["registered_at"]) for w in json.loads(text or "[]")]


def widening_to_wire(wide: NetworkStream, was: NetworkStream) -> tuple[str, str]:
    """A ``WidenStream`` step's stream as widened, and as the plan saw it."""
    return json.dumps(stream_to_json(wide)), json.dumps(stream_to_json(was))


def widening_from_wire(wide: str, was: str) -> tuple[NetworkStream, NetworkStream]:
    return stream_from_json(json.loads(wide)), stream_from_json(json.loads(was))
