"""Local multi-process networks: every super-peer of a topology as its own daemon process.

``up`` starts them, waits until every one answers gRPC health checks, and records their pids in
a state file so that ``down`` (from another terminal) can stop them; ``up`` itself stops them
all on Ctrl-C. A daemon that dies during start-up is reported with the end of its log.

``secure`` (the CLI's default): the backbone's keys go to ``<state>/tls`` (made once, kept), the
daemons serve with them, and an admin token is written to ``<state>/admin.token``
(``LocalNetwork.credentials`` uses both).

``ProcessLauncher`` is these functions behind the ``Launcher`` interface (``streamglobe network
…``). It cuts a link by telling each of its two daemons to stop talking to the other (on
loopback there is no link to unplug: ``superpeer.rpc.link_cut``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from superpeer.options import serve_flags
from superpeer.topology import Topology, load_topology

from thinpeer.client import SuperPeerClient, ThinPeerError
from thinpeer.credentials import Credentials, CredentialsError

from .launcher import Access, LaunchError, Progress, UpOptions

STATE_FILE = "network.json"
KEYS_DIR = "tls"
ADMIN_TOKEN = "admin.token"


class NetworkError(LaunchError):
    """The process launcher's failure (``LaunchError``)."""




@dataclass
class LocalNetwork:
    topology: Topology
    processes: dict[str, subprocess.Popen]
    state_dir: Path
    commands: dict[str, list[str]] = field(default_factory=dict)  # how each daemon was started
    topology_path: str = ""
    credentials: Credentials = field(default_factory=Credentials)  # an admin's (plaintext if insecure)
    keys: Path = Path()  # the backbone directory the daemons serve with (secure)

    def client(self, peer: str, timeout: float = 30.0) -> SuperPeerClient:
        return SuperPeerClient(self.topology.address(peer), timeout, self.credentials)

    @property
    def addresses(self) -> dict[str, str]:
        return dict(self.topology.addresses)

    def kill(self, peer: str) -> None:
        """``kill -9`` one daemon (a crash: nothing is shut down cleanly)."""
        proc = self.processes[peer]
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def start(self, peer: str, wait_s: float = 60.0) -> None:
        """Start a stopped daemon again with the same options and state directory (it takes
        back what it had kept), and wait until it answers."""
        if self.processes[peer].poll() is None:
            raise NetworkError(f"{peer} is running")
        cut = json.loads((self.state_dir / STATE_FILE).read_text()).get("cut", [])
        self.processes[peer] = _launch(self.commands[peer] + cut_flags(cut, peer), self.state_dir / f"{peer}.log",
                                       append=True)
        self.record()  # ``down`` stops the new process, not the old pid
        _wait_healthy(self, {peer}, wait_s, None, stop_all=False)

    def record(self, fresh: bool = False) -> None:
        """The state file ``down`` reads: this launcher and every daemon's pid, and the links cut
        (``cut_link``; none in a ``fresh`` network)."""
        topology, state = self.topology, self.state_dir / STATE_FILE
        cut = json.loads(state.read_text()).get("cut", []) if state.exists() and not fresh else []
        state.write_text(json.dumps({
            "launcher": os.getpid(), "topology": self.topology_path,
            "ca": str(self.keys / "ca.pem") if self.credentials.secure else None,
            "superpeers": {p: {"pid": proc.pid, "address": topology.addresses[p],
                               "command": self.commands.get(p, [])}
                           for p, proc in self.processes.items()}, "cut": cut}, indent=2))

    def stop(self) -> None:
        _stop_restarted(self.state_dir, {p.pid for p in self.processes.values()})
        for p in self.processes.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for p in self.processes.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
        state = self.state_dir / STATE_FILE
        if state.exists():
            state.unlink()


def healthy(address: str, timeout: float = 0.5, credentials: Credentials | None = None) -> bool:
    try:
        with (credentials or Credentials()).channel(address) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
            return reply.status == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:
        return False


def up(topology_path: str | Path, executor: str = "inline", state_dir: str | Path = ".streamglobe",
       wait_s: float = 60.0, progress=None, spark: dict | None = None,
       serve_args: tuple[str, ...] = (), secure: bool = False, keys: Path | None = None) -> LocalNetwork:
    """``spark``: master, trigger_ms (--executor spark) and lateness (None: the defaults);
    ``serve_args``: more options of ``superpeer serve`` for every daemon; ``secure``: TLS and
    tokens (the keys made in the state directory, or given as ``keys``: a ``certs init``
    directory), else plaintext (``--insecure``)."""
    topology = load_topology(topology_path)
    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    credentials, security_args = Credentials(), ["--insecure"]
    if secure:
        credentials = secure_backbone(topology, state, keys)
        security_args = ["--tls-dir", str(Path(keys or state / KEYS_DIR).resolve())]
    busy = [p for p, a in topology.addresses.items()
            if healthy(a, 0.2) or healthy(a, 0.2, credentials)]
    if busy:
        raise NetworkError(f"super-peers already answer at {', '.join(topology.addresses[p] for p in busy)}; "
                           "stop them first (streamglobe network down, with the --state-dir that "
                           "network was started with, if any)")
    extra = serve_flags(spark)
    processes, commands = {}, {}
    for peer in topology.backbone.peers:
        commands[peer] = [sys.executable, "-m", "thinpeer.cli", "superpeer", "serve", "--topology",
                          str(Path(topology_path).resolve()), "--id", peer, "--executor", executor,
                          "--state-dir", str((state / peer).resolve()), *security_args, *extra,
                          "--log-file", str((state / f"{peer}.log").resolve()),  # (rotated by the daemon)
                          *serve_args]
        processes[peer] = _launch(commands[peer], state / f"{peer}.log")
    network = LocalNetwork(topology, processes, state, commands, str(Path(topology_path).resolve()),
                           credentials, Path(keys or state / KEYS_DIR).resolve())
    network.record(fresh=True)
    _wait_healthy(network, set(processes), wait_s, progress)
    return network


def secure_backbone(topology: Topology, state: Path, given: Path | None = None) -> Credentials:
    """The backbone's keys in ``state/tls`` (made once: a restarted network keeps its CA and
    token key, so tokens issued earlier stay valid), or ``given``; an admin's token in
    ``state/admin.token`` (when the token key is there to sign it)."""
    from .certs import TOKEN_KEY, ensure_backbone, topology_hosts
    from .tokens import write_admin_token

    keys = Path(given) if given is not None else state / KEYS_DIR
    hosts = topology_hosts(topology)
    missing = [p for p in hosts if not (keys / f"{p}.pem").exists()]
    if given is not None and (missing or not (keys / "ca.pem").exists()):
        raise NetworkError(f"{keys} has no certificate for {', '.join(missing) or 'the CA'}: "
                           "make it with streamglobe certs init --topology FILE --out DIR")
    if given is None:
        ensure_backbone(keys, hosts)
    if not (keys / TOKEN_KEY).exists():
        return Credentials((keys / "ca.pem").read_bytes())
    return Credentials((keys / "ca.pem").read_bytes(), write_admin_token(keys, state / ADMIN_TOKEN))


def _launch(command: list[str], log_path: Path, append: bool = False) -> subprocess.Popen:
    log = open(log_path, "a" if append else "w")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_healthy(network: LocalNetwork, pending: set[str], wait_s: float, progress,
                  stop_all: bool = True) -> None:
    """Until every daemon of ``pending`` answers health checks; one that exits, or does not
    answer in time, is reported with the end of its log (and the network stopped, at start-up)."""
    deadline = time.monotonic() + wait_s
    while pending:
        for peer in sorted(pending):
            if network.processes[peer].poll() is not None:
                if stop_all:
                    network.stop()
                tail = (network.state_dir / f"{peer}.log").read_text()[-800:]
                raise NetworkError(f"super-peer {peer} exited during start-up:\n{tail}")
            if healthy(network.topology.addresses[peer], credentials=network.credentials):
                pending.discard(peer)
                if progress:
                    progress(f"{peer} healthy at {network.topology.addresses[peer]}")
        if pending and time.monotonic() > deadline:
            if stop_all:
                network.stop()
            raise NetworkError(f"super-peers not healthy after {wait_s:.0f} s: {', '.join(sorted(pending))}")
        if pending:
            time.sleep(0.1)


def _stop_restarted(state_dir: Path, own: set[int]) -> None:
    """Daemons started again from another terminal (``network start``) are not this launcher's
    children: stop them too, by the pids in the state file."""
    state = state_dir / STATE_FILE
    try:
        info = json.loads(state.read_text())
    except (OSError, ValueError):
        return
    for entry in info.get("superpeers", {}).values():
        if entry.get("pid") not in own:
            try:
                os.kill(entry["pid"], signal.SIGTERM)
            except (ProcessLookupError, KeyError):
                pass


def _recorded_network(state_dir: str | Path) -> tuple[Path, dict]:
    """The state file ``up`` wrote, and what it says."""
    state = Path(state_dir) / STATE_FILE
    if not state.exists():
        raise NetworkError(f"no running network recorded in {state}")
    return state, json.loads(state.read_text())


def _recorded(state_dir: str | Path, peer: str) -> tuple[Path, dict, dict]:
    state, info = _recorded_network(state_dir)
    return state, info, info["superpeers"][_recorded_name(state, info, peer)]


def _recorded_name(state: Path, info: dict, peer: str) -> str:
    """The recorded super-peer ``peer`` names (in any case)."""
    name = next((p for p in info["superpeers"] if p.lower() == peer.lower()), None)
    if name is None:
        raise NetworkError(f"no super-peer {peer} in the network recorded in {state} "
                           f"(it has {', '.join(info['superpeers'])})")
    return name


def _alive(pid: int) -> bool:
    """Running (a killed daemon its launcher has not reaped yet is a zombie: not running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def kill_peer(state_dir: str | Path, peer: str) -> int:
    """``kill -9`` one daemon of a running network (a crash); returns its pid."""
    _, _, entry = _recorded(state_dir, peer)
    if not _alive(entry["pid"]):
        raise NetworkError(f"{peer} is not running")
    os.kill(entry["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(entry["pid"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return entry["pid"]


def start_peer(state_dir: str | Path, peer: str, wait_s: float = 60.0) -> str:
    """Start a stopped daemon of a running network again, with its options and state directory
    (it takes back what it kept) and the links recorded as cut cut from its start; wait until
    it answers. Returns its address."""
    state, info, entry = _recorded(state_dir, peer)
    if _alive(entry["pid"]):
        raise NetworkError(f"{peer} is running (pid {entry['pid']})")
    if not entry.get("command"):
        raise NetworkError(f"the state file {state} does not say how {peer} was started")
    name = next(p for p, e in info["superpeers"].items() if e is entry)
    credentials = _ca_only(info)
    proc = _launch(entry["command"] + cut_flags(info.get("cut", []), name), Path(state_dir) / f"{name}.log",
                   append=True)
    entry["pid"] = proc.pid
    state.write_text(json.dumps(info, indent=2))
    deadline = time.monotonic() + wait_s
    while not healthy(entry["address"], credentials=credentials):
        if proc.poll() is not None:
            tail = (Path(state_dir) / f"{name}.log").read_text()[-800:]
            raise NetworkError(f"super-peer {name} exited during start-up:\n{tail}")
        if time.monotonic() > deadline:
            raise NetworkError(f"super-peer {name} not healthy after {wait_s:.0f} s")
        time.sleep(0.1)
    return entry["address"]


def cut_link(state_dir: str | Path, a: str, b: str, cut: bool, credentials: Credentials) -> str:
    """Cut the backbone link between two daemons, both ways, or restore it: each of the two
    stops (or resumes) talking to the other (``superpeer.rpc.link_cut``; on loopback there is
    no link to unplug). Recorded in the state file: a daemon started again is cut again. An end
    that is not running now is told when it is started."""
    state, info = _recorded_network(state_dir)
    a, b = (_recorded_name(state, info, peer) for peer in (a, b))
    first, second = info["superpeers"][a], info["superpeers"][b]
    if frozenset((a, b)) not in load_topology(info["topology"]).backbone.links:
        raise NetworkError(f"{a}–{b} is not a link of the backbone")
    later, done = [], []
    for here, there, entry in ((a, b, first), (b, a, second)):
        if not _alive(entry["pid"]):
            later.append(here)
            continue
        try:
            with SuperPeerClient(entry["address"], credentials=credentials) as client:
                client.cut_link(there, cut)
        except ThinPeerError as exc:
            for back, other, address in done:  # (not half done: the first end is put back)
                with SuperPeerClient(address, credentials=credentials) as client, suppress(ThinPeerError):
                    client.cut_link(other, not cut)
            raise NetworkError(f"{here} could not {'cut' if cut else 'restore'} its link to {there}: {exc}") from None
        done.append((here, there, entry["address"]))
    cuts = {tuple(pair) for pair in info.get("cut", [])} - {(a, b), (b, a)}
    info["cut"] = sorted([list(pair) for pair in cuts] + ([[a, b]] if cut else []))
    state.write_text(json.dumps(info, indent=2))
    said = f"{'cut' if cut else 'restored'} the link {a}–{b}{' (both ways)' if cut else ''}"
    return said + (f"; {' and '.join(later)} not running: told when started" if later else "")


def cut_flags(cut: list[list[str]], peer: str) -> list[str]:
    """``serve --cut-link`` for each recorded cut link of ``peer``: a daemon started again is cut
    from its first call on."""
    return [flag for a, b in cut if peer in (a, b) for flag in ("--cut-link", b if a == peer else a)]


def _ca_only(info: dict) -> Credentials:
    """Enough to ask a daemon of the recorded network whether it is healthy."""
    try:
        return Credentials.resolve(info["ca"]) if info.get("ca") else Credentials()
    except CredentialsError as exc:
        raise NetworkError(str(exc)) from None


def down(state_dir: str | Path = ".streamglobe") -> list[str]:
    state, info = _recorded_network(state_dir)
    stopped = []
    for peer, entry in info["superpeers"].items():
        try:
            os.kill(entry["pid"], signal.SIGTERM)
            stopped.append(peer)
        except ProcessLookupError:
            pass
    try:
        os.kill(info["launcher"], signal.SIGTERM)
    except ProcessLookupError:
        pass
    state.unlink(missing_ok=True)
    return stopped


def status(state_dir: str | Path = ".streamglobe") -> dict:
    """Each daemon of the recorded network: pid, address, running or not, and healthy or not."""
    state, info = _recorded_network(state_dir)
    credentials = _ca_only(info)
    peers = {}
    for peer, entry in info["superpeers"].items():
        running = _alive(entry["pid"])
        health = ("healthy" if healthy(entry["address"], credentials=credentials) else "unhealthy") if running else "none"
        peers[peer] = {"pid": entry["pid"], "address": entry["address"],
                       "status": "running" if running else "exited", "health": health}
    return {"state_dir": str(state.parent.resolve()), "topology": info.get("topology", ""),
            "launcher": {"pid": info["launcher"], "running": _alive(info["launcher"])},
            "secure": bool(info.get("ca")), "superpeers": peers, "cut_links": info.get("cut", [])}


class ProcessLauncher:
    """The ``Launcher`` over daemon processes on this host (``streamglobe network …``). ``up``
    keeps the network it started in ``running``: its caller stays in the foreground and stops
    it (``LocalNetwork.stop``); the other verbs work from any process, by the state file."""

    kind = "processes"

    def __init__(self, state_dir: str | Path = ".streamglobe") -> None:
        self.state_dir = Path(state_dir)
        self.running: LocalNetwork | None = None

    def up(self, topology: Path, options: UpOptions, progress: Progress) -> Access:
        self.running = up(topology, options.executor, self.state_dir, options.timeout_s, progress, options.spark,
                          options.serve_args, options.secure, options.keys)
        return self.access()

    def down(self) -> str:
        stopped = down(self.state_dir)
        return f"stopped {', '.join(stopped) or 'nothing (already gone)'}"

    def status(self) -> dict:
        return status(self.state_dir)

    def kill(self, peer: str) -> str:
        return f"killed {peer} (pid {kill_peer(self.state_dir, peer)}, SIGKILL)"

    def start(self, peer: str, progress: Progress) -> str:
        return f"{peer} serving again at {start_peer(self.state_dir, peer)}"

    def cut(self, a: str, b: str) -> str:
        return cut_link(self.state_dir, a, b, cut=True, credentials=self.access().credentials())

    def restore(self, a: str, b: str) -> str:
        return cut_link(self.state_dir, a, b, cut=False, credentials=self.access().credentials())

    def access(self) -> Access:
        _, info = _recorded_network(self.state_dir)
        token = self.state_dir / ADMIN_TOKEN
        return Access({p: e["address"] for p, e in info["superpeers"].items()},
                      Path(info["ca"]).resolve() if info.get("ca") else None,
                      token.resolve() if info.get("ca") and token.exists() else None)
