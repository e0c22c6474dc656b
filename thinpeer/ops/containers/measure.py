"""Measure what a shaped link really carries: a TCP transfer between two super-peers' containers.

The receiver counts bytes from the first one to the end of the stream, so that what the sender's
buffers still held when it stopped is counted inside the measured time.
"""

from __future__ import annotations

import json
import subprocess

from .compose import Deployment
from .images import DeployError
from .project import compose

PROBE_PORT = 50099

_RECEIVER = f"""
import json, socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {PROBE_PORT})); s.listen(1); s.settimeout(10); print("ready", flush=True)
c, _ = s.accept(); c.settimeout(60); total = 0; first = None
while True:
    b = c.recv(1 << 16)
    if not b: break
    if first is None: first = time.monotonic()
    total += len(b)
print(json.dumps({{"bytes": total, "seconds": time.monotonic() - (first or time.monotonic())}}))
"""

_SENDER = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], {port}), timeout=5); chunk = b"x" * (1 << 16)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end: c.sendall(chunk)
c.close()
""".format(port=PROBE_PORT)


def link_rate(deployment: Deployment, a: str, b: str, seconds: float = 3.0) -> dict:
    """Send from ``a`` to ``b`` for ``seconds``; the rate the receiver saw, in bit/s."""
    here, there = deployment.peers[a], deployment.peers[b]
    receiver = subprocess.Popen(
        ["docker-compose", "-p", deployment.project, "-f", str(deployment.compose_file), "exec", "-T",
         there.service, "python3", "-c", _RECEIVER], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = receiver.stdout.readline() if receiver.stdout else ""
        if ready.strip() != "ready":
            raise DeployError(f"the probe receiver on {b} did not start: {receiver.stderr.read() if receiver.stderr else ''}")
        sent = compose(deployment, "exec", "-T", here.service, "python3", "-c", _SENDER, there.ip,
                       str(seconds), check=False)
        out, err = receiver.communicate(timeout=seconds + 60)  # the receiver gives up by itself
    finally:
        if receiver.poll() is None:
            receiver.kill()
    if sent.returncode != 0:
        raise DeployError(f"no transfer from {a} to {b}: {sent.stderr.strip().splitlines()[-1:]}")
    try:
        seen = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise DeployError(f"the probe receiver on {b} failed: {err.strip()}") from None
    configured = deployment.peers[a].links.get(b, (None, None))[1]
    rate = 8 * seen["bytes"] / max(seen["seconds"], 1e-9)
    return {"from": a, "to": b, "bytes": seen["bytes"], "seconds": round(seen["seconds"], 3),
            "measured_bit_s": round(rate), "configured_bit_s": configured}
