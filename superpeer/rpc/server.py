"""Start a super-peer: the node, its gRPC server with health checking and reflection, listening
on its client address (thin peers) and its peer address (the other super-peers; mutual TLS
when secure, ``security.tls``)."""

from __future__ import annotations

import ctypes
import ctypes.util
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

from ..data.limits import MESSAGE_LIMIT, DataLimits
from ..history.archive.writer import ArchiveSettings
from ..history.bounds import HistoryBound
from ..node import Node
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


@dataclass
class RunningSuperPeer:
    node: Node
    server: grpc.Server
    address: str
    peer_address: str = ""
    peer_server: grpc.Server | None = None

    def stop(self, grace: float = 0.5) -> None:
        self.node.stop()
        stopping = [s.stop(grace) for s in (self.server, self.peer_server) if s is not None]
        for done in stopping:
            done.wait(5)


def start_superpeer(topology: Topology, peer: str, port: int | None = None,
                    retention: int = 500_000, executor: str = "inline",
                    executor_options: dict | None = None,
                    limits: DataLimits | None = None, listen: str | None = None,
                    heartbeats: HeartbeatSettings | None = None,
                    state_dir: str | Path | None = None,
                    watermark_idle_s: float = 2.0, security: Security | None = None,
                    peer_listen: str | None = None, quotas: UserQuotas | None = None,
                    history: HistoryBound | None = None, archive: ArchiveSettings | None = None,
                    replay_rate: float = 0.0) -> RunningSuperPeer:
    """Serve ``peer``. It listens on ``listen`` and ``peer_listen`` (e.g. ``0.0.0.0:50051`` and
    ``0.0.0.0:50052`` in a container) if given, else on its topology addresses; the other
    super-peers always reach it at its topology peer address. ``security.tls``: TLS on both, mutual
    on the peer address, tokens for thin peers (None: plaintext, everyone trusted)."""
    node = Node(peer, topology, retention=retention, executor=executor,
                executor_options=executor_options, limits=limits, heartbeats=heartbeats,
                state_dir=state_dir, watermark_idle_s=watermark_idle_s, security=security, history=history,
                archive=archive, replay_rate=replay_rate)
    # Two servers, each with its own threads: thin peers (long reads, slow subscriptions) can
    # never hold up the other super-peers' transfers and heartbeats.
    server, peer_server = _server(f"rpc-{peer}"), _server(f"peer-rpc-{peer}")
    pb_grpc.add_ThinPeerServicer_to_server(ThinPeerService(node, security, quotas), server)
    pb_grpc.add_SuperPeerServicer_to_server(SuperPeerService(node, security), peer_server)
    server.add_generic_rpc_handlers((refused_super_peer_calls(peer),))
    health_servicer = health.HealthServicer()
    for s in (server, peer_server):
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, s)
    services = (pb.DESCRIPTOR.services_by_name["ThinPeer"].full_name,
                pb.DESCRIPTOR.services_by_name["SuperPeer"].full_name,
                health.SERVICE_NAME, reflection.SERVICE_NAME)
    reflection.enable_server_reflection((services[0], *services[2:]), server)
    host, _, default_port = topology.address(peer).rpartition(":")
    address = listen or f"{host}:{port if port is not None else default_port}"
    peer_address = peer_listen or topology.peer_address(peer)
    for s, where, credentials in ((server, address, security.client_credentials() if security else None),
                                  (peer_server, peer_address, security.backbone_credentials() if security else None)):
        bound = s.add_secure_port(where, credentials) if credentials is not None else s.add_insecure_port(where)
        if bound == 0:
            raise OSError(f"cannot listen on {where} (port in use?)")
    server.start()
    peer_server.start()
    node.start()
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    for name in services[:2]:
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return RunningSuperPeer(node, server, address, peer_address, peer_server)


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
