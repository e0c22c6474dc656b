"""The container's health check.

A super-peer: its gRPC health service answers SERVING. A Spark master (``SG_ROLE=spark-master``):
every expected worker has registered with it. A Spark worker: its web UI answers.
"""

import json
import os
import sys
import urllib.request

role = os.environ.get("SG_ROLE", "superpeer")
if role.startswith("spark-"):
    url = f"http://{os.environ['SG_SPARK_HOST']}:{os.environ['SG_SPARK_UI_PORT']}/json/"
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            state = json.load(reply)
    except (OSError, ValueError) as exc:
        print(f"not answering: {exc}", file=sys.stderr)
        sys.exit(1)
    if role == "spark-master":
        alive, wanted = state.get("aliveworkers", 0), int(os.environ.get("SG_SPARK_WORKERS", "1"))
        if alive < wanted:
            print(f"{alive} of {wanted} workers registered", file=sys.stderr)
            sys.exit(1)
    sys.exit(0)

import grpc  # noqa: E402 — only a super-peer's check needs it
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402

port = os.environ.get("SG_PORT", "50051")
try:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
except grpc.RpcError as exc:
    print(f"not serving: {exc.code().name}", file=sys.stderr)
    sys.exit(1)
sys.exit(0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1)
