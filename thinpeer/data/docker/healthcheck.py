"""The container's health check.

A super-peer: its gRPC port accepts connections. A Spark master (``SG_ROLE=spark-master``):
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

# A super-peer: its gRPC port accepts connections (it listens once the daemon has started). A
# plain socket, not a gRPC health call: importing grpc costs ~0.3 s of CPU per check, and with
# a check every few seconds in each of 16 containers on two cores that alone starves the daemons.
import socket  # noqa: E402

port = int(os.environ.get("SG_PORT", "50051"))
try:
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
except OSError as exc:
    print(f"not listening on {port}: {exc}", file=sys.stderr)
    sys.exit(1)
sys.exit(0)
