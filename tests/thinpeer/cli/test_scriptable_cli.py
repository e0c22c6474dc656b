"""The CLI as a script drives it: ``--version``, ``--json`` on what reports something, and exit
codes that say how a command ended — real super-peers, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from network_harness import reference_results, running_network

from photons.generator import generate
from sharing.scenarios import EXAMPLE_QUERIES
from thinpeer.client import SuperPeerClient
from thinpeer.credentials import Credentials
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("thin_peer_state")]
CLI = [sys.executable, "-m", "thinpeer.cli"]
NOTHING = """<none>{ for $p in stream("photons")/photons/photon where $p/en > 1000
                   return <p>{ $p/en }</p> }</none>"""


def run(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False,
                          env=None if env is None else {**os.environ, **env})


def test_version_and_exit_codes_are_said() -> None:
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("streamglobe ") and r.stdout.strip() != "streamglobe"
    r = run("--help")
    assert "exit codes: 0 done; 1 error" in r.stdout and "3 subscribe --timeout" in r.stdout
    assert run("subscribe", "--no-such-flag").returncode == 2


def test_publish_and_subscribe_report_as_json_lines(tmp_path: Path) -> None:
    photons = [p.to_xml() for p in generate(700, seed=3)]
    doc = tmp_path / "photons.xml"
    doc.write_text("<photons>" + "".join(photons[:300]) + "</photons>")
    query = EXAMPLE_QUERIES / "q1.wxq"
    with running_network(tmp_path) as (topology, _):
        sp1, sp4 = topology.address("SP1"), topology.address("SP4")
        r = run("publish", "--superpeer", sp4, "--stream", "photons", "--input", str(doc), "--keep-open", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == {"stream": "photons", "published": 300, "rejected": 0, "reasons": [],
                                        "stray_text": 0, "closed": False, "held_back_s": 0.0, "held_back": ""}

        r = run("subscribe", "--superpeer", sp1, "--query", str(query), "--count", "0", "--json")
        assert r.returncode == 0, r.stderr
        (line,) = r.stdout.splitlines()  # (one object: the id, where reading starts, the plan)
        said = json.loads(line)
        sid = said["subscription"]
        assert said["offset"] == 0 and sid.startswith("SP1-") and "SP4" in said["plan"] and said["sample"] == 1

        more = photons[300:]
        doc.write_text("<photons>" + "".join(photons) + "</photons>")  # (--resume skips what SP4 has)
        r = run("publish", "--superpeer", sp4, "--stream", "photons", "--input", str(doc), "--resume")
        assert r.returncode == 0, r.stderr
        r = run("subscribe", "--superpeer", sp1, "--resume", sid, "--format", "lines", "--json", "--timeout", "30")
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        first, results, last = json.loads(lines[0]), lines[1:-1], json.loads(lines[-1])
        assert first == {"subscription": sid, "offset": 0}
        assert results == reference_results(query.read_text(), more)
        assert last == {"subscription": sid, "results": len(results), "stopped": "the stream closed",
                        "next_offset": len(results)}

        r = run("subscribe", "--superpeer", sp1, "--query", str(query), "--json")  # (XML is not lines)
        assert r.returncode == 1 and "--format lines or ndjson" in r.stderr


def test_a_subscribe_that_times_out_without_a_result_exits_3(tmp_path: Path) -> None:
    (tmp_path / "none.wxq").write_text(NOTHING)
    with running_network(tmp_path) as (topology, _):
        r = run("publish", "--superpeer", topology.address("SP4"), "--stream", "photons", "--synthetic",
                "--count", "200", "--keep-open")
        assert r.returncode == 0, r.stderr
        r = run("subscribe", "--superpeer", topology.address("SP1"), "--query", str(tmp_path / "none.wxq"),
                "--timeout", "2")
        assert r.returncode == 3, r.stderr
        assert "0 result item(s); stopped: timeout" in r.stderr
        # (a conjunction that holds only where an element repeats: kept, and the super-peer says so)
        (tmp_path / "twice.wxq").write_text(NOTHING.replace("$p/en > 1000", "$p/en > 1000 and $p/en < 0"))
        r = run("subscribe", "--superpeer", topology.address("SP1"), "--query", str(tmp_path / "twice.wxq"),
                "--timeout", "1")
        assert r.returncode == 3, r.stderr
        assert (f"{tmp_path / 'twice.wxq'}:1:58: warning: $p/en > 1000 and $p/en < 0 holds only on items "
                "where $p/en occurs more than once") in r.stderr


def test_the_super_peer_may_come_from_the_environment(tmp_path: Path) -> None:
    with running_network(tmp_path) as (topology, _):
        r = run("status", env={"STREAMGLOBE_SUPERPEER": topology.address("SP5")})
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["superpeer"] == "SP5"
    r = run("status", env={"STREAMGLOBE_SUPERPEER": ""})
    assert r.returncode == 1 and "give --superpeer HOST:PORT (or set STREAMGLOBE_SUPERPEER)" in r.stderr


def test_network_up_says_where_everything_is_as_one_json_object(tmp_path: Path, thin_peer_state: Path) -> None:
    """And keeps its state (the backbone's private keys among it) in the user's state directory,
    never in the working directory."""
    topology = with_free_ports(shipped_topology("paper-example"), tmp_path / "t.toml")
    work = tmp_path / "work"
    work.mkdir()
    config = tmp_path / "every.toml"  # (settings for every daemon: the launcher's own stay its own)
    config.write_text('log_format = "json"\nmetrics_port = 0\nid = "ignored"\n')
    launcher = subprocess.Popen([*CLI, "network", "up", "--topology", str(topology), "--json", "--config",
                                 str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=work)
    try:
        said = json.loads(launcher.stdout.readline())
        assert sorted(said["superpeers"]) == [f"SP{k}" for k in range(8)]
        assert said["secure"] is True and said["state_dir"] == str(thin_peer_state / "network")
        token = Path(said["token_file"]).read_text().strip()
        client = SuperPeerClient(said["superpeers"]["SP2"],
                                 credentials=Credentials(Path(said["ca"]).read_bytes(), token))
        assert client.status()["superpeer"] == "SP2"  # (as the network's admin, from what it said)
        shown = json.loads(run("network", "status").stdout)["superpeers"]  # (found with no --state-dir)
        assert shown["SP2"]["status"] == "running"
        credentials = json.loads(run("network", "credentials", "--json").stdout)
        assert credentials["ca"] == said["ca"] and credentials["exports"].startswith("export STREAMGLOBE_CA=")
        for verb, args in (("kill", ["SP7"]), ("start", ["SP7"]), ("cut", ["SP4", "SP5"]), ("restore", ["SP4", "SP5"])):
            done = run("network", verb, *args, "--json")
            assert done.returncode == 0, done.stderr
            reported = json.loads(done.stdout)
            assert reported["verb"] == verb and reported["said"], reported
        assert reported["link"] == ["SP4", "SP5"]
        assert client.status()["cut_links"] == []
        log = (Path(said["state_dir"]) / "SP2.log").read_text()
        assert '"level": "info", "peer": "SP2"' in log and "metrics on http://127.0.0.1:" in log
    finally:
        down = run("network", "down")
        launcher.wait(60)
    assert down.returncode == 0, down.stderr
    assert list(work.iterdir()) == []


def test_query_check_says_its_verdict_as_json(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.wxq", tmp_path / "bad.wxq"
    good.write_text((EXAMPLE_QUERIES / "q1.wxq").read_text())
    bad.write_text('<x>{ for $p in stream("photons")/photons/photon\n where $p/en > 1 and $p/en != 0 return $p }</x>')
    ok = run("query", "check", str(good), "--json")
    assert (ok.returncode, json.loads(ok.stdout)) == (0, {"file": str(good), "ok": True, "warnings": []})
    wrong = run("query", "check", str(bad), "--json")
    verdict = json.loads(wrong.stdout)
    assert wrong.returncode == 1 and (verdict["ok"], verdict["line"], verdict["column"]) == (False, 2, 28)
    assert verdict["error"].startswith("'!=' compares strings only")
