"""A compose project for a topology: one container per super-peer on one bridge network.

Every super-peer gets a fixed address on the network (so no name has to be resolved, and no
gRPC channel caches an address that changed), **listens** on ``0.0.0.0:50051`` for thin peers
and ``0.0.0.0:50052`` for the other super-peers, and is **advertised** to them at its fixed
address through a topology file written for the containers. The host reaches each one's thin-peer
port through a published loopback port; the super-peer port stays on the backbone network.
Secure by default: each container gets its own key, certificate, the CA certificate and the token
key (``project.up``), and nothing else of the backbone's keys.

Each backbone link is shaped at both ends: a container's egress towards a neighbour goes through
an htb class at the link's bandwidth (``entrypoint.sh``), so each direction of the link carries at
most ``b(e)``. Data items travel only over links; control calls (lookups, two-phase commit,
heartbeats) go directly between super-peers and are not shaped.

With ``--spark-cluster N`` a Spark standalone master and N workers join the network
(``spark_cluster``) and every super-peer runs its executor's query on it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .spark_cluster import SparkNode, cluster_services, master_url

PORT = 50051  # thin peers (published on the host)
PEER_PORT = 50052  # the other super-peers (on the backbone network only)
KEYS_MOUNT = "/etc/streamglobe/tls"  # this peer's keys as mounted (read-only, owned by the host's user)
KEYS_IN_CONTAINER = "/tmp/streamglobe-tls"  # where the entrypoint copies them for the daemon's user
TOPOLOGY_IN_CONTAINER = "/etc/streamglobe/topology.toml"
SETTINGS_FILE = "settings.toml"  # in the state directory: deploy up --config
SETTINGS_IN_CONTAINER = "/etc/streamglobe/settings.toml"
# in the container's own layer: kept across `deploy kill` and `deploy start`, gone with `deploy down`
STATE_IN_CONTAINER = "/tmp/streamglobe-state"
FIRST_HOST = 10  # peers take the network's addresses from .10 on, in topology order
FIRST_CLASS = 0x10  # htb class of a peer's first link (hex, as tc reads it)


@dataclass
class PeerPlacement:
    peer: str
    service: str
    ip: str
    # neighbour -> (htb class on this peer's egress, bandwidth in bit/s)
    links: dict[str, tuple[str, int]] = field(default_factory=dict)


@dataclass
class Deployment:
    """What ``deploy up`` created, kept in the state directory for the later commands."""

    project: str
    directory: str
    executor: str
    peers: dict[str, PeerPlacement]
    spark: dict[str, SparkNode] = field(default_factory=dict)  # empty: each executor is local[N]

    @property
    def compose_file(self) -> Path:
        return Path(self.directory) / "docker-compose.yml"

    def save(self) -> None:
        (Path(self.directory) / "deployment.json").write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, directory: Path) -> "Deployment":
        data = json.loads((directory / "deployment.json").read_text())
        peers = {p: PeerPlacement(v["peer"], v["service"], v["ip"],
                                  {n: (c, int(r)) for n, (c, r) in v["links"].items()})
                 for p, v in data["peers"].items()}
        spark = {name: SparkNode(**node) for name, node in data.get("spark", {}).items()}
        return cls(data["project"], data["directory"], data["executor"], peers, spark)


def default_subnet(project: str) -> str:
    """A /24 of 10.231–10.238 chosen by the project's name, so that projects side by side (a
    benchmark next to a simulation) do not ask for the same addresses."""
    digest = int.from_bytes(hashlib.sha256(project.encode()).digest()[:2], "big")
    return f"10.{231 + digest % 8}.{digest // 8 % 256}.0/24"


def place(topology_file: Path, subnet: str) -> tuple[dict, dict[str, PeerPlacement]]:
    """The topology's data and each super-peer's service name, address and shaped links."""
    from superpeer.topology import load_topology

    backbone = load_topology(topology_file).backbone  # checked strictly: a fault names its line
    data = tomllib.loads(topology_file.read_text(encoding="utf-8"))
    network = ipaddress.ip_network(subnet)
    hosts = list(network.hosts())
    ids = list(backbone.peers)
    if len(ids) + FIRST_HOST > len(hosts):
        raise ValueError(f"subnet {subnet} is too small for {len(ids)} super-peers")
    services = {p: p.lower().replace("_", "-") for p in ids}
    if len(set(services.values())) != len(ids):
        raise ValueError("super-peer ids differ only in case; they must name distinct containers")
    placements = {p: PeerPlacement(p, services[p], str(hosts[FIRST_HOST - 1 + i])) for i, p in enumerate(ids)}
    for link in backbone.links.values():
        a, b, rate = link.a, link.b, int(link.bandwidth)
        for here, there in ((a, b), (b, a)):
            placement = placements[here]
            placement.links[there] = (f"{FIRST_CLASS + len(placement.links):x}", rate)
    return data, placements


def container_topology(data: dict, placements: dict[str, PeerPlacement]) -> str:
    """The topology as the containers read it: every address is the peer's fixed address."""
    peers = [{**p, "address": f"{placements[str(p['id'])].ip}:{PORT}",
              "peer_address": f"{placements[str(p['id'])].ip}:{PEER_PORT}"} for p in data.get("superpeer", [])]
    return toml_tables({"superpeer": peers, "link": data.get("link", []),
                        **({"subnet": data["subnet"]} if data.get("subnet") else {})})


def compose_file(deployment: Deployment, image: str, subnet: str, serve_args: list[str],
                 keys: Path | None = None) -> dict:
    """The compose project (JSON is YAML, so it is written as JSON). ``keys``: each peer's
    directory of keys is ``keys/<id>`` (``peer_keys``), mounted read-only (None: --insecure)."""
    services = {}
    topology = str(Path(deployment.directory) / "topology.toml")
    for peer, placement in deployment.peers.items():
        ips = {n: deployment.peers[n].ip for n in placement.links}
        shaping = ";".join(f"{cls} {ips[n]} {rate}" for n, (cls, rate) in placement.links.items())
        cluster = (["--spark-master", master_url(deployment.spark), "--spark-feed-host", placement.ip]
                   if deployment.spark else [])
        security = ["--tls-dir", KEYS_IN_CONTAINER] if keys is not None else ["--insecure"]
        volumes = [f"{topology}:{TOPOLOGY_IN_CONTAINER}:ro"]
        if keys is not None:
            volumes.append(f"{keys / peer}:{KEYS_MOUNT}:ro")
        settings = []  # ``deploy up --config``: every super-peer's settings file (the flags here win)
        if (Path(deployment.directory) / SETTINGS_FILE).is_file():
            volumes.append(f"{Path(deployment.directory) / SETTINGS_FILE}:{SETTINGS_IN_CONTAINER}:ro")
            settings = ["--config", SETTINGS_IN_CONTAINER]
        services[placement.service] = {
            "image": image,
            "hostname": placement.service,
            "command": ["--topology", TOPOLOGY_IN_CONTAINER, "--id", peer,
                        "--listen", f"0.0.0.0:{PORT}", "--peer-listen", f"0.0.0.0:{PEER_PORT}",
                        "--state-dir", STATE_IN_CONTAINER, *security, *settings, *serve_args, *cluster],
            "cap_add": ["NET_ADMIN"],
            "environment": {"SG_LINKS": shaping, "SG_PORT": str(PORT)},
            "volumes": volumes,
            "ports": [f"127.0.0.1::{PORT}"],
            "networks": {"backbone": {"ipv4_address": placement.ip}},
            "init": True,
            "stop_grace_period": "5s",
            "labels": {"org.streamglobe.peer": peer},
        }
    if deployment.spark:
        services.update(cluster_services(deployment.spark, image, len(deployment.peers)))
    return {"version": "2.4", "services": services,
            "networks": {"backbone": {"driver": "bridge", "ipam": {"config": [{"subnet": subnet}]}}}}


def toml_tables(tables: dict[str, list[dict]]) -> str:
    """Arrays of tables of scalars, lists and inline tables: all a topology file holds."""
    lines = []
    for name, rows in tables.items():
        for row in rows:
            lines.append(f"[[{name}]]")
            lines += [f"{k} = {toml_value(v)}" for k, v in row.items()]
            lines.append("")
    return "\n".join(lines)


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, (list, tuple)):  # e.g. a super-peer's drawing position = [x, y]
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):  # a super-peer's own settings, as an inline table
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise ValueError(f"cannot write {v!r} into a topology file")
