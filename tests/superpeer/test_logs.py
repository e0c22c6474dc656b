"""A daemon's log file rotates and takes everything the process writes (``serve --log-file``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from network_harness import until

from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology

ROOT = Path(__file__).resolve().parents[2]


def test_the_log_file_rolls_over_and_keeps_the_process_output(tmp_path):
    topology = with_free_ports(shipped_topology("paper-example"), tmp_path / "t.toml")
    log = tmp_path / "SP4.log"
    # (alone: its two neighbours, the peers it watches, are declared down, a warning each,
    # ~230 bytes: each rolls the 200-byte file over)
    daemon = subprocess.Popen([sys.executable, "-m", "thinpeer.cli", "superpeer", "serve", "--topology",
                               str(topology), "--id", "SP4", "--insecure", "--in-memory", "--heartbeat-s", "0.1",
                               "--log-file", str(log), "--log-max-bytes", "200", "--log-backups", "2"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        def rolled() -> bool:
            return (tmp_path / "SP4.log.2").exists()

        until(rolled, 60, what=lambda: str(sorted(p.name for p in tmp_path.iterdir())))
        everything = "".join(p.read_text() for p in sorted(tmp_path.glob("SP4.log*")))
        assert "declared down" in everything  # (log records)
        assert not (tmp_path / "SP4.log.3").exists()  # (two kept)
        # (a record never goes past the size; a printed line may: it is not a record)
        assert all(p.stat().st_size <= 200 + 300 for p in tmp_path.glob("SP4.log*"))
    finally:
        daemon.terminate()
        daemon.wait(30)
    # the line the process prints where it serves went to the log too (the first file, since rolled
    # away or not: it is written once, at start-up); nothing went to a file beside the log
    assert sorted(p.name for p in tmp_path.iterdir()) == ["SP4.log", "SP4.log.1", "SP4.log.2", "t.toml"]


def test_printed_output_lands_in_the_log_file(tmp_path):
    topology = with_free_ports(shipped_topology("paper-example"), tmp_path / "t.toml")
    log = tmp_path / "SP4.log"
    daemon = subprocess.Popen([sys.executable, "-m", "thinpeer.cli", "superpeer", "serve", "--topology",
                               str(topology), "--id", "SP4", "--insecure", "--in-memory", "--log-file", str(log)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        until(lambda: log.exists() and "serving thin peers" in log.read_text(), 60)
    finally:
        daemon.terminate()
        out, err = daemon.communicate(timeout=30)
    assert "serving thin peers" not in err and out == ""
