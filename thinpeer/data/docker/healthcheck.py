"""The container's health check: the super-peer's gRPC health service answers SERVING."""

import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

port = os.environ.get("SG_PORT", "50051")
try:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
except grpc.RpcError as exc:
    print(f"not serving: {exc.code().name}", file=sys.stderr)
    sys.exit(1)
sys.exit(0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1)
