"""One interface for the two ways to run a network of super-peers (issue 30): processes on this
host (``processes``: ``streamglobe network …``) and containers (``containers``: ``streamglobe
deploy …``). Both are driven by a state directory written at ``up``, so any terminal may take
down, look at, or break the network with the same verbs: ``up``, ``down``, ``status``,
``kill``, ``start``, ``cut``, ``restore``, and ``access``: the addresses and an admin's
credentials a user of the network needs.

Both do everything: containers cut a link with ``iptables``; daemon processes, which talk over
loopback, are each told to stop talking to the other (``superpeer.rpc.link_cut``). A failure is a
``LaunchError`` with its reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from thinpeer.credentials import Credentials

Progress = Callable[[str], None]


class LaunchError(Exception):
    """A launcher's failure, said in one line (the process launcher's ``NetworkError`` and the
    container launcher's ``DeployError`` are ones)."""


@dataclass(frozen=True)
class UpOptions:
    """What both launchers start a network with; ``serve_args``: more ``superpeer serve``
    options for every daemon; ``secure``: TLS and tokens (else ``--insecure``); ``keys``: a
    ``certs init`` directory to serve with (default: made in the state directory)."""

    executor: str = "inline"
    spark: dict = field(default_factory=dict)  # ``superpeer.options.spark_options``
    serve_args: tuple[str, ...] = ()
    secure: bool = True
    keys: Path | None = None
    timeout_s: float = 60.0


@dataclass(frozen=True)
class Access:
    """What a user of a running network needs: where its super-peers answer, and an admin's CA
    certificate and token files (None: an ``--insecure`` network)."""

    addresses: dict[str, str]
    ca: Path | None = None
    token: Path | None = None

    def credentials(self) -> Credentials:
        if self.ca is None:
            return Credentials()
        token = self.token.read_text().strip() if self.token is not None and self.token.exists() else None
        return Credentials(self.ca.read_bytes(), token)

    def exports(self) -> str:
        """The shell lines that make every ``streamglobe`` command of this shell an admin's."""
        if self.ca is None:
            return "# INSECURE: plaintext, no tokens: nothing to export"
        token = f" STREAMGLOBE_TOKEN=$(cat {self.token})" if self.token is not None and self.token.exists() else ""
        return f"export STREAMGLOBE_CA={self.ca}{token}"


class Launcher(Protocol):
    """A network of super-peers, found by its state directory (given when it is made)."""

    kind: str  # "processes", "containers": said in errors

    def up(self, topology: Path, options: UpOptions, progress: Progress) -> Access:
        """Start every super-peer of ``topology`` and wait until all are healthy."""
        ...

    def down(self) -> str:
        """Stop and remove every super-peer; what was stopped, for people."""
        ...

    def status(self) -> dict:
        """Each super-peer's state and health (and each link's, where links are enforced)."""
        ...

    def kill(self, peer: str) -> str:
        """Crash one super-peer (nothing shut down cleanly)."""
        ...

    def start(self, peer: str, progress: Progress) -> str:
        """Start a killed super-peer again on its state and wait until it answers."""
        ...

    def cut(self, a: str, b: str) -> str:
        """The link between two super-peers drops everything, both ways."""
        ...

    def restore(self, a: str, b: str) -> str:
        """Undo ``cut``."""
        ...

    def access(self) -> Access:
        """The addresses and an admin's credentials of the running network."""
        ...
