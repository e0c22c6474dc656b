"""A Spark standalone cluster next to the super-peers: one master and N worker containers.

They run from the super-peers' own image (the pyspark it installs ships the ``spark-class``
launcher, Java 17 is in it, and the workers' Python processes import StreamGlobe's operators from
it), each on a fixed address after the super-peers'. Every super-peer on ``--executor spark``
runs its micro-batches as one application on the cluster: its driver stays in the super-peer's
container, its executors on the workers fetch the items from the super-peer's feed over the
network (authenticated by the feed's secret).

A standalone master gives an application every free core unless told otherwise, and the next
super-peer's application would then wait forever; so each application takes ``CORES_PER_APP``
cores, one per executor (spread over the workers), and the workers offer enough cores for every
super-peer at once — more than the machine has, since a core here is a task slot, not a CPU.

Traffic between a super-peer and the cluster is not on the backbone and is not shaped: the
cluster stands for the compute next to each super-peer, not for a link of the topology.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass

MASTER_PORT = 7077
MASTER_UI_PORT = 8080
WORKER_UI_PORT = 8081
CORES_PER_APP = 2
MEMORY_PER_CORE_MB = 640  # an executor's 512 MiB heap and its overhead


@dataclass
class SparkNode:
    service: str  # "spark-master", "spark-worker-1", …
    role: str  # "master" | "worker"
    ip: str


def place_cluster(workers: int, subnet: str, taken: int, peer_services: frozenset[str] = frozenset()
                  ) -> dict[str, SparkNode]:
    """The master and ``workers`` workers on the addresses after the ``taken`` first hosts."""
    if workers < 1:
        raise ValueError("a Spark cluster needs at least one worker (--spark-cluster N, N >= 1)")
    hosts = list(ipaddress.ip_network(subnet).hosts())
    if taken + workers + 1 > len(hosts):
        raise ValueError(f"subnet {subnet} is too small for the super-peers and {workers + 1} Spark containers")
    names = ["spark-master"] + [f"spark-worker-{i}" for i in range(1, workers + 1)]
    clash = sorted(set(names) & set(peer_services))
    if clash:
        raise ValueError(f"super-peer(s) named like the Spark containers ({', '.join(clash)}): rename them")
    return {name: SparkNode(name, "master" if i == 0 else "worker", str(hosts[taken + i]))
            for i, name in enumerate(names)}


def master_url(nodes: dict[str, SparkNode]) -> str:
    return f"spark://{nodes['spark-master'].ip}:{MASTER_PORT}"


def worker_cores(applications: int, workers: int) -> int:
    """Cores each worker offers so that every super-peer's application gets its cores."""
    return max(1, math.ceil(applications * CORES_PER_APP / workers))


def cluster_services(nodes: dict[str, SparkNode], image: str, applications: int) -> dict[str, dict]:
    """The compose services of the cluster (health: the master knows every worker)."""
    workers = [n for n in nodes.values() if n.role == "worker"]
    cores = worker_cores(applications, len(workers))
    url = master_url(nodes)
    services = {}
    for node in nodes.values():
        if node.role == "master":
            command = ["master", node.ip, str(MASTER_PORT), str(MASTER_UI_PORT)]
            ports = [f"127.0.0.1::{MASTER_UI_PORT}"]  # the master's web UI, for the curious
        else:
            command = ["worker", url, node.ip, str(cores), f"{cores * MEMORY_PER_CORE_MB}m", str(WORKER_UI_PORT)]
            ports = []
        services[node.service] = {
            "image": image,
            "hostname": node.service,
            "entrypoint": ["/bin/sh", "/usr/local/lib/streamglobe/spark.sh"],
            "command": command,
            "environment": {"SG_ROLE": f"spark-{node.role}", "SG_SPARK_HOST": node.ip,
                            "SG_SPARK_WORKERS": str(len(workers)),
                            "SG_SPARK_UI_PORT": str(MASTER_UI_PORT if node.role == "master" else WORKER_UI_PORT)},
            "ports": ports,
            "networks": {"backbone": {"ipv4_address": node.ip}},
            "init": True,
            "stop_grace_period": "5s",
            "labels": {"org.streamglobe.spark": node.service},
        }
    return services
