"""``streamglobe deploy``: bring a topology up in containers, watch it, and break it on demand.

The state directory (default ``.streamglobe-deploy/<project>``) holds the compose file, the
containers' topology and ``deployment.json``; every later command reads them from there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable

from sharing.backbone import TopologyError
from thinpeer.credentials import Credentials

from ..launcher import Access, UpOptions
from .compose import FIRST_HOST, PORT, Deployment, compose_file, container_topology, default_subnet, place
from .images import DeployError, build_images, run
from .spark_cluster import MASTER_UI_PORT, place_cluster

Progress = Callable[[str], None]
ADMIN_TOKEN = "admin.token"


def state_directory(root: Path, project: str) -> Path:
    return (root / project).resolve()


def compose(deployment: Deployment, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = ["docker-compose", "-p", deployment.project, "-f", str(deployment.compose_file), *args]
    if check:
        return run(cmd)
    return subprocess.run(cmd, capture_output=True, text=True)


def up(topology_file: Path, root: Path, project: str, executor: str, serve_args: list[str],
       subnet: str, progress: Progress, timeout: float = 240.0, spark_workers: int = 0,
       secure: bool = False) -> dict[str, str]:
    """Start every super-peer in its container (and a Spark cluster of ``spark_workers``
    workers, if any); wait until all are healthy; the super-peers' host addresses. ``secure``:
    the backbone's keys in ``<state>/tls`` (made once), each container given its own, and an
    admin token in ``<state>/admin.token`` (``credentials``)."""
    if spark_workers and executor != "spark":
        raise DeployError("--spark-cluster runs the Spark executor on a cluster: it needs --executor spark")
    directory = state_directory(root, project)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        data, placements = place(topology_file, subnet)
        spark = (place_cluster(spark_workers, subnet, FIRST_HOST - 1 + len(placements),
                               frozenset(p.service for p in placements.values())) if spark_workers else {})
    except TopologyError as exc:  # (it names the file and line)
        raise DeployError(str(exc)) from None
    except (ValueError, KeyError) as exc:
        raise DeployError(f"{topology_file}: {exc}") from None
    deployment = Deployment(project, str(directory), executor, placements, spark)
    image = build_images(progress)  # reuses the base and dependency layers; the app layer is seconds
    (directory / "topology.toml").write_text(container_topology(data, placements))
    keys = secure_keys(directory, placements) if secure else None
    if not secure:
        (directory / ADMIN_TOKEN).unlink(missing_ok=True)
    deployment.compose_file.write_text(json.dumps(
        compose_file(deployment, image, subnet, ["--executor", executor, *serve_args], keys), indent=2) + "\n")
    deployment.save()
    cluster = f" and a Spark master with {spark_workers} worker(s)" if spark else ""
    progress(f"starting {len(placements)} super-peer containers{cluster} (project {project})")
    compose(deployment, "up", "-d", "--force-recreate", "--remove-orphans")
    wait_healthy(deployment, timeout, progress)
    if spark:
        ui = compose(deployment, "port", "spark-master", str(MASTER_UI_PORT), check=False).stdout.strip()
        progress(f"Spark master web UI: http://{ui.replace('0.0.0.0:', '127.0.0.1:')}")
    return host_addresses(deployment)


def secure_keys(directory: Path, placements: dict) -> Path:
    """The backbone's keys in ``directory/tls`` (made once: tokens stay valid across ``up``),
    one directory per peer under ``tls/peers`` with only what it needs, an admin token."""
    from thinpeer.ops.certs import ensure_backbone
    from thinpeer.ops.tokens import write_admin_token

    hosts = {p: [v.ip, v.service, "localhost", "127.0.0.1"] for p, v in placements.items()}
    keys = ensure_backbone(directory / "tls", hosts)
    per_peer = keys / "peers"
    for peer in hosts:
        (per_peer / peer).mkdir(parents=True, exist_ok=True)
        for name in ("ca.pem", "token.pub", f"{peer}.pem", f"{peer}.key"):
            shutil.copy2(keys / name, per_peer / peer / name)
    write_admin_token(keys, directory / ADMIN_TOKEN)
    return per_peer


def credentials(directory: Path) -> Credentials:
    """An admin's credentials for a deployment (plaintext for an insecure one)."""
    return ContainerLauncher(directory.parent, directory.name).access({}).credentials()


def services(deployment: Deployment) -> dict[str, str]:
    """Every container's name in ``container_states`` (a peer id, or a Spark service's name)
    and its compose service."""
    return {**{p: v.service for p, v in deployment.peers.items()},
            **{name: name for name in deployment.spark}}


def wait_healthy(deployment: Deployment, timeout: float, progress: Progress,
                 only: set[str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    names = {n: v for n, v in services(deployment).items() if only is None or n in only}
    waiting: list[str] = list(names)
    while time.monotonic() < deadline:
        states = container_states(deployment)
        waiting = [p for p in names if states.get(p, {}).get("health") != "healthy"]
        dead = [p for p in waiting if states.get(p, {}).get("status") in ("exited", "dead")]
        if dead:
            logs = compose(deployment, "logs", "--tail", "20", names[dead[0]], check=False).stdout
            raise DeployError(f"container(s) {', '.join(dead)} exited:\n{logs}")
        if not waiting:
            return
        time.sleep(0.5)
    raise DeployError(f"{', '.join(waiting)} not healthy after {timeout:.0f} s "
                      f"(see docker-compose -p {deployment.project} logs)")


def container_states(deployment: Deployment) -> dict[str, dict]:
    """Per super-peer (and Spark service): container status and health, from ``docker inspect``."""
    ids = compose(deployment, "ps", "-q", check=False).stdout.split()
    if not ids:
        return {}
    out = json.loads(run(["docker", "inspect", *ids]).stdout)
    states = {}
    for c in out:
        labels = c["Config"]["Labels"]
        peer = labels.get("org.streamglobe.peer") or labels.get("org.streamglobe.spark")
        state = c["State"]
        states[peer] = {"container": c["Name"].lstrip("/"), "status": state["Status"],
                        "health": state.get("Health", {}).get("Status", "none")}
    return states


def host_addresses(deployment: Deployment) -> dict[str, str]:
    addresses = {}
    for peer, placement in deployment.peers.items():
        port = compose(deployment, "port", placement.service, str(PORT)).stdout.strip()
        if not port:
            raise DeployError(f"{peer} has no published port (is its container running?)")
        addresses[peer] = port.replace("0.0.0.0:", "127.0.0.1:")
    return addresses


def down(deployment: Deployment) -> None:
    compose(deployment, "down", "--volumes", "--remove-orphans", "-t", "5")


def status(deployment: Deployment) -> dict:
    """Containers, health and the link rates the kernel enforces (read back from tc)."""
    states = container_states(deployment)
    links = []
    for peer, placement in deployment.peers.items():
        running = states.get(peer, {}).get("status") == "running"
        enforced = _enforced_rates(deployment, peer) if running else {}
        dropped = _dropped_addresses(deployment, peer) if running else None
        for neighbour, (cls, rate) in placement.links.items():
            links.append({"from": peer, "to": neighbour, "configured_bit_s": rate,
                          "enforced": enforced.get(cls, "unknown (container not running)"),
                          "cut": None if dropped is None else deployment.peers[neighbour].ip in dropped})
    shown = {"project": deployment.project, "executor": deployment.executor,
             "superpeers": {p: states.get(p, {"status": "missing"}) for p in deployment.peers},
             "links": links}
    if deployment.spark:
        shown["spark_cluster"] = {name: {**states.get(name, {"status": "missing"}), "ip": node.ip}
                                  for name, node in deployment.spark.items()}
    return shown


def _exec(deployment: Deployment, peer: str, *cmd: str) -> subprocess.CompletedProcess:
    service = deployment.peers[_known(deployment, peer)].service
    return compose(deployment, "exec", "-T", "-u", "root", service, *cmd)


def _enforced_rates(deployment: Deployment, peer: str) -> dict[str, str]:
    shown = _exec(deployment, peer, "tc", "class", "show", "dev", "eth0").stdout
    rates = {}
    for line in shown.splitlines():  # "class htb 1:10 root prio 0 rate 100Mbit ceil 100Mbit …"
        words = line.split()
        if len(words) > 2 and "rate" in words:
            rates[words[2].split(":")[1]] = words[words.index("rate") + 1]
    return rates


def _dropped_addresses(deployment: Deployment, peer: str) -> set[str]:
    """The addresses this peer's firewall drops outgoing traffic to (one call for all links)."""
    rules = _exec(deployment, peer, "iptables", "-S", "OUTPUT").stdout
    return {words[words.index("-d") + 1].split("/")[0] for words in (line.split() for line in rules.splitlines())
            if "-d" in words and "DROP" in words}


def _known(deployment: Deployment, peer: str, also: list[str] | None = None) -> str:
    """The super-peer id ``peer`` names (any case); ``also``: other names the caller takes,
    listed in the error."""
    for p in deployment.peers:
        if p.lower() == peer.lower():
            return p
    what = "super-peer or Spark container" if also else "super-peer"
    raise DeployError(f"no {what} {peer} in project {deployment.project} "
                      f"(there are {', '.join([*deployment.peers, *(also or [])])})")


def _link(deployment: Deployment, a: str, b: str) -> tuple[str, str]:
    a, b = _known(deployment, a), _known(deployment, b)
    if b not in deployment.peers[a].links:
        raise DeployError(f"{a} and {b} are not linked in the topology")
    return a, b


def _service(deployment: Deployment, name: str) -> str:
    """A super-peer's service by its id, or a Spark container by its name (spark-worker-1)."""
    if name.lower() in deployment.spark:
        return name.lower()
    return deployment.peers[_known(deployment, name, also=list(deployment.spark))].service


def kill(deployment: Deployment, peer: str) -> None:
    compose(deployment, "kill", _service(deployment, peer))


def start(deployment: Deployment, peer: str, progress: Progress, timeout: float = 120.0) -> None:
    """Start a container again and wait until it (not the others: some may be down on purpose)
    is healthy."""
    service = _service(deployment, peer)
    compose(deployment, "start", service)
    wait_healthy(deployment, timeout, progress, only={n for n, v in services(deployment).items() if v == service})


def cut(deployment: Deployment, a: str, b: str) -> None:
    """The link drops all traffic, both ways (control calls between the two included)."""
    a, b = _link(deployment, a, b)
    for here, there in ((a, b), (b, a)):
        if not _is_cut(deployment, here, there):
            ip = deployment.peers[there].ip
            _exec(deployment, here, "iptables", "-I", "INPUT", "-s", ip, "-j", "DROP")
            _exec(deployment, here, "iptables", "-I", "OUTPUT", "-d", ip, "-j", "DROP")


def restore(deployment: Deployment, a: str, b: str) -> None:
    a, b = _link(deployment, a, b)
    for here, there in ((a, b), (b, a)):
        ip = deployment.peers[there].ip
        while _is_cut(deployment, here, there):
            _exec(deployment, here, "iptables", "-D", "INPUT", "-s", ip, "-j", "DROP")
            _exec(deployment, here, "iptables", "-D", "OUTPUT", "-d", ip, "-j", "DROP")


def _is_cut(deployment: Deployment, here: str, there: str) -> bool:
    service = deployment.peers[here].service
    ip = deployment.peers[there].ip
    done = compose(deployment, "exec", "-T", "-u", "root", service, "iptables", "-C", "OUTPUT", "-d", ip,
                   "-j", "DROP", check=False)
    return done.returncode == 0


def bandwidth(deployment: Deployment, a: str, b: str, rate_bit_s: int) -> None:
    """Change a link's rate, both directions, while everything runs."""
    if rate_bit_s <= 0:
        raise DeployError("a link's bandwidth must be positive (use 'deploy cut' to drop it)")
    a, b = _link(deployment, a, b)
    for here, there in ((a, b), (b, a)):
        cls, _ = deployment.peers[here].links[there]
        _exec(deployment, here, "tc", "class", "change", "dev", "eth0", "parent", "1:", "classid",
              f"1:{cls}", "htb", "rate", f"{rate_bit_s}bit", "ceil", f"{rate_bit_s}bit")
        deployment.peers[here].links[there] = (cls, rate_bit_s)
    deployment.save()


class ContainerLauncher:
    """The ``Launcher`` over containers (``streamglobe deploy …``): the project ``project``,
    whose compose file and ``deployment.json`` are under ``root/project``. ``subnet`` and
    ``spark_workers`` are for ``up`` (default subnet: chosen by the project's name)."""

    kind = "containers"

    def __init__(self, root: Path, project: str, subnet: str | None = None, spark_workers: int = 0) -> None:
        self.root, self.project = Path(root), project
        self.subnet, self.spark_workers = subnet, spark_workers

    @property
    def directory(self) -> Path:
        return state_directory(self.root, self.project)

    def deployment(self) -> Deployment:
        if not (self.directory / "deployment.json").is_file():
            raise DeployError(f"no deployment {self.project!r} under {self.root} "
                              "(start one with 'streamglobe deploy up')")
        return Deployment.load(self.directory)

    def up(self, topology: Path, options: UpOptions, progress: Progress) -> Access:
        addresses = up(topology, self.root, self.project, options.executor, list(options.serve_args),
                       self.subnet or default_subnet(self.project), progress, options.timeout_s,
                       self.spark_workers, secure=options.secure)
        return self.access(addresses)

    def down(self) -> str:
        down(self.deployment())
        return f"removed project {self.project}"

    def status(self) -> dict:
        return status(self.deployment())

    def kill(self, peer: str) -> str:
        kill(self.deployment(), peer)
        return f"killed {peer}'s container"

    def start(self, peer: str, progress: Progress) -> str:
        start(self.deployment(), peer, progress)
        return f"{peer}'s container started again, healthy"

    def cut(self, a: str, b: str) -> str:
        cut(self.deployment(), a, b)
        return f"cut the link {a}–{b} (both ways)"

    def restore(self, a: str, b: str) -> str:
        restore(self.deployment(), a, b)
        return f"restored the link {a}–{b}"

    def access(self, addresses: dict[str, str] | None = None) -> Access:
        token = self.directory / ADMIN_TOKEN
        secure = token.exists()
        return Access(addresses if addresses is not None else host_addresses(self.deployment()),
                      self.directory / "tls" / "ca.pem" if secure else None, token if secure else None)
