"""`network up` and `demo` hand the re-optimisation flags (issue 31) on to every daemon they
start, and only when the user gave them: a daemon that does not know them yet still starts for
everyone else. No daemon is started: the launcher, the demo and the process spawner are stubs
that record what they were given."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from superpeer.options import add_reoptimisation_options
from thinpeer.cli import main
from thinpeer.cli import network as network_cli
from thinpeer.cli.launchers import given_reoptimisation_flags
from thinpeer.ops import processes
from thinpeer.ops.launcher import LaunchError, UpOptions
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology

REOPTIMISE = ("--no-reoptimise", "--reoptimise-every", "--reoptimise-margin", "--reoptimise-cooldown")


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_reoptimisation_options(parser)
    return parser.parse_args(list(argv))


def reoptimise_flags(command: tuple[str, ...] | list[str]) -> list[str]:
    return [flag for flag in command if flag in REOPTIMISE]


@pytest.mark.parametrize("argv,expected", [
    ((), []),
    (("--reoptimise-every", "5s", "--reoptimise-margin", "0.1", "--reoptimise-cooldown", "10s"), []),  # the defaults
    (("--no-reoptimise",), ["--no-reoptimise"]),
    (("--reoptimise-every", "2s"), ["--reoptimise-every", "2.0", "--reoptimise-margin", "0.1",
                                    "--reoptimise-cooldown", "10.0"]),
    (("--reoptimise-margin", "0.25"), ["--reoptimise-every", "5.0", "--reoptimise-margin", "0.25",
                                       "--reoptimise-cooldown", "10.0"]),
])
def test_only_flags_the_user_changed_are_passed_on(argv: tuple[str, ...], expected: list[str]) -> None:
    assert given_reoptimisation_flags(parsed(*argv)) == expected


class RecordingLauncher:
    """A ``Launcher`` whose ``up`` records its options and refuses (nothing is started)."""

    kind = "processes"

    def __init__(self) -> None:
        self.options: UpOptions | None = None

    def up(self, topology: Path, options: UpOptions, progress) -> None:
        self.options = options
        raise LaunchError("recorded; not started")


@pytest.mark.parametrize("given,expected", [
    ((), ()),
    (("--reoptimise-every", "2s", "--reoptimise-cooldown", "4s"),
     ("--reoptimise-every", "2.0", "--reoptimise-margin", "0.1", "--reoptimise-cooldown", "4.0")),
    (("--no-reoptimise", "--replay-rate", "100"), ("--replay-rate", "100.0", "--no-reoptimise")),
])
def test_network_up_passes_the_given_flags_to_the_daemons(monkeypatch, tmp_path, given, expected) -> None:
    recording = RecordingLauncher()
    monkeypatch.setattr(network_cli, "launcher", lambda args: recording)
    code = main(["network", "up", "--topology", "paper-example", "--state-dir", str(tmp_path), *given])
    assert code == 1 and recording.options is not None  # (the stub refused after recording)
    assert recording.options.serve_args == expected


@pytest.mark.parametrize("given,expected", [((), ()), (("--no-reoptimise",), ("--no-reoptimise",))])
def test_demo_passes_the_given_flags_to_the_daemons(monkeypatch, given, expected) -> None:
    import thinpeer.ops.demo as demo

    seen: dict = {}
    monkeypatch.setattr(demo, "run_demo", lambda **kwargs: seen.update(kwargs) or 0)
    monkeypatch.setattr("signal.signal", lambda *args: None)  # (the demo's SIGTERM handler: not in pytest)
    assert main(["demo", "--insecure", *given]) == 0
    assert seen["serve_args"] == expected


class ExitedProcess:
    """What ``processes._launch`` returns, for a daemon that exited at once."""

    pid = 2 ** 22 + 1  # (no such process: the launcher's clean-up signals nothing real)

    def poll(self) -> int:
        return 1

    def wait(self, timeout: float | None = None) -> int:
        return 1


def test_every_daemon_command_line_carries_serve_args(monkeypatch, tmp_path) -> None:
    topology = with_free_ports(shipped_topology("paper-example"), tmp_path / "t.toml")
    commands: list[list[str]] = []

    def launch(command: list[str], log_path: Path, append: bool = False) -> ExitedProcess:
        commands.append(command)
        log_path.write_text("stub\n")
        return ExitedProcess()

    monkeypatch.setattr(processes, "_launch", launch)
    flags = ("--reoptimise-every", "2.0", "--reoptimise-margin", "0.1", "--reoptimise-cooldown", "4.0")
    with pytest.raises(processes.NetworkError, match="exited during start-up"):
        processes.up(topology, state_dir=tmp_path / "state", serve_args=flags)
    assert len(commands) == 8
    assert all(reoptimise_flags(c) == reoptimise_flags(flags) and c[-len(flags):] == list(flags) for c in commands)
