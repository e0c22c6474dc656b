"""Start a super-peer: the node (``node``), then its gRPC servers with health checking and
reflection, listening on its client address (thin peers) and its peer address (the other
super-peers; mutual TLS when secure, ``security.tls``)."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
import signal
import threading
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from proto import streamglobe_pb2 as pb
from proto import streamglobe_pb2_grpc as pb_grpc

from ..control.reoptimisation_settings import ReoptimisationSettings
from ..data.limits import MESSAGE_LIMIT, DataLimits
from ..history.archive.writer import ArchiveSettings
from ..history.bounds import HistoryBound
from ..node import Node, NodeSettings
from ..recovery.failure_detector import HeartbeatSettings
from ..security.access import UserQuotas
from ..security.tls import Security
from ..topology import Topology
from .service import SuperPeerService, ThinPeerService, refused_super_peer_calls

MALLOC_ARENAS = 2
M_ARENA_MAX = -8  # glibc mallopt parameter


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Let glibc keep few malloc arenas (unless MALLOC_ARENA_MAX says otherwise), before the
    daemon's threads start. By default every thread that allocates under contention gets an
    arena of its own, so the memory of a big item parsed on one gRPC thread is not reused for
    the next one parsed on another: measured on 20 MB items, a daemon's resident size grew by
    ~80 MB per item with the default and by the 20 MB result it keeps with two arenas
    (benchmarks/big_items.py). Python holds the GIL while it allocates, so fewer arenas cost
    little contention. Does nothing elsewhere than glibc."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False


class Servers:
    """A super-peer's two gRPC servers, each with its own threads, so that thin peers (long reads,
    slow subscriptions) never hold up the other super-peers' transfers and heartbeats: one on
    its client address (thin peers; TLS and tokens), one on its peer address (the other
    super-peers; mutual TLS), with health checking and reflection. A long-lived part: it
    listens from ``start``, and is serving when that returns."""

    def __init__(self, node: Node, address: str, peer_address: str, security: Security | None = None,
                 quotas: UserQuotas | None = None) -> None:
        self.address, self.peer_address, self.security = address, peer_address, security
        self.server, self.peer_server = _server(f"rpc-{node.id}"), _server(f"peer-rpc-{node.id}")
        pb_grpc.add_ThinPeerServicer_to_server(ThinPeerService(node, security, quotas), self.server)
        pb_grpc.add_SuperPeerServicer_to_server(SuperPeerService(node, security), self.peer_server)
        self.server.add_generic_rpc_handlers((refused_super_peer_calls(node.id),))
        self.health = health.HealthServicer()
        for s in (self.server, self.peer_server):
            health_pb2_grpc.add_HealthServicer_to_server(self.health, s)
        self.services = (pb.DESCRIPTOR.services_by_name["ThinPeer"].full_name,
                         pb.DESCRIPTOR.services_by_name["SuperPeer"].full_name)
        reflection.enable_server_reflection((self.services[0], health.SERVICE_NAME, reflection.SERVICE_NAME),
                                            self.server)

    def start(self) -> None:
        security = self.security
        for s, where, credentials in (
                (self.server, self.address, security.client_credentials() if security else None),
                (self.peer_server, self.peer_address, security.backbone_credentials() if security else None)):
            bound = s.add_secure_port(where, credentials) if credentials is not None else s.add_insecure_port(where)
            if bound == 0:
                raise OSError(f"cannot listen on {where} (port in use?)")
        self.server.start()
        self.peer_server.start()
        for name in ("", *self.services):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace: float = 0.5) -> None:
        stopping = [s.stop(grace) for s in (self.server, self.peer_server)]
        for done in stopping:
            done.wait(5)


@dataclass
class RunningSuperPeer:
    node: Node
    servers: Servers

    @property
    def address(self) -> str:
        return self.servers.address

    @property
    def peer_address(self) -> str:
        return self.servers.peer_address

    def stop(self, grace: float = 0.5) -> None:
        """The servers first (no new calls), then the node's parts, in reverse order."""
        self.servers.stop(grace)
        self.node.stop()


def start_superpeer(topology: Topology, peer: str, port: int | None = None,
                    retention: int = 500_000, executor: str = "inline",
                    executor_options: dict | None = None,
                    limits: DataLimits | None = None, listen: str | None = None,
                    heartbeats: HeartbeatSettings | None = None,
                    state_dir: str | Path | None = None,
                    watermark_idle_s: float = 2.0, security: Security | None = None,
                    peer_listen: str | None = None, quotas: UserQuotas | None = None,
                    history: HistoryBound | None = None, archive: ArchiveSettings | None = None,
                    replay_rate: float = 0.0, cut_links: tuple[str, ...] = (),
                    reoptimisation: ReoptimisationSettings | None = None,
                    widening: bool = True, metrics_port: int | None = None, network_joins: bool = True,
                    metrics_host: str = "127.0.0.1", freeze: bool = False) -> RunningSuperPeer:
    """Serve ``peer``. It listens on ``listen`` and ``peer_listen`` (e.g. ``0.0.0.0:50051`` and
    ``0.0.0.0:50052`` in a container) if given, else on its topology addresses; the other
    super-peers always reach it at its topology peer address. ``security``: TLS on both, mutual
    on the peer address, tokens for thin peers (None: plaintext, everyone trusted);
    ``metrics_port``: serve Prometheus metrics there (``superpeer.metrics``). The node
    starts first (what it had is back before the first call is taken), then the servers.

    ``freeze`` (a daemon, the process its own): what was made before the node starts (modules,
    the node's parts) lives as long as the process, and is moved out of the collector's way,
    so that a full collection does not stop every thread for ~0.1 s while items are on their
    way (measured in ``benchmarks/network_latency.py``). What the node restores (subscriptions,
    their results) is made after, and is collected when it goes."""
    settings = NodeSettings(retention=retention, executor=executor, executor_options=executor_options or {},
                            limits=limits or DataLimits(), heartbeats=heartbeats or HeartbeatSettings(),
                            state_dir=state_dir, watermark_idle_s=watermark_idle_s, history=history,
                            archive=archive, replay_rate=replay_rate, cut_links=cut_links,
                            reoptimisation=reoptimisation or ReoptimisationSettings(), widening=widening,
                            metrics_port=metrics_port, metrics_host=metrics_host, network_joins=network_joins)
    node = Node(peer, topology, settings, security)
    host, _, default_port = topology.address(peer).rpartition(":")
    servers = Servers(node, listen or f"{host}:{port if port is not None else default_port}",
                      peer_listen or topology.peer_address(peer), security, quotas)
    if freeze:
        gc.collect()
        gc.freeze()
    node.start()
    try:
        servers.start()
    except BaseException:
        servers.stop(0)
        node.stop()
        raise
    return RunningSuperPeer(node, servers)


def _server(threads: str) -> grpc.Server:
    return grpc.server(futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix=threads),
                       options=[("grpc.max_receive_message_length", MESSAGE_LIMIT),
                                ("grpc.max_send_message_length", MESSAGE_LIMIT)])


def serve_forever(running: RunningSuperPeer) -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    logging.getLogger("streamglobe.superpeer").info("%s serving thin peers on %s, super-peers on %s",
                                                    running.node.id, running.address, running.peer_address)
    stop.wait()
    running.stop()
