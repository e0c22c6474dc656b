"""A daemon forks (to start its Spark JVM) while its gRPC threads are busy: the fork leaves gRPC
in the parent intact. With gRPC's fork support on (its default) this printed "epoll_wait error:
Bad file descriptor" within a few hundred forks, and once killed a daemon at start-up."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import superpeer  # first, as the daemon's entry point does: before grpc
    import subprocess, threading
    from concurrent import futures
    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(4))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stop = threading.Event()
    calls = []

    def hammer():
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while not stop.is_set():
                stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
                calls.append(1)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for _ in range(300):  # a preexec_fn makes subprocess fork, as PySpark's JVM launch does
        subprocess.Popen(["true"], preexec_fn=lambda: None).wait()
    stop.set()
    for t in threads:
        t.join(10)
    server.stop(None).wait(10)
    assert calls, "no gRPC call ran beside the forks"
    print("forked 300 times beside", len(calls), "calls")
""")


def test_forking_beside_busy_grpc_threads_leaves_grpc_intact():
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    grpc_complaints = [line for line in done.stderr.splitlines()
                       if "epoll" in line or "fork_posix" in line or "Check failed" in line or "Kick failed" in line]
    assert not grpc_complaints, grpc_complaints[:5]
    assert "forked 300 times" in done.stdout
