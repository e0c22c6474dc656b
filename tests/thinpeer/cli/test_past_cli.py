"""The past as a user reaches it from the command line (issue 15): publish part of a photon
document and keep the stream open, subscribe with --from-start and with --since, publish the
rest with --resume; each subscriber's document equals the reference over the whole
(respectively the remaining) document. The archive the super-peer wrote answers `archive
query` with the same results, exactly, or approximately with intervals."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, photon_document
from lxml import etree
from network_harness import reference_results, running_network, same, until

from sharing.scenarios import EXAMPLE_QUERIES
from superpeer.history.archive.writer import ArchiveSettings
from thinpeer.client import SuperPeerClient

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("thin_peer_state")]
CLI = [sys.executable, "-m", "thinpeer.cli"]


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def items_of(document: str) -> list[str]:
    root = etree.fromstring(document.encode())
    return [etree.tostring(child, encoding="unicode") for child in root
            if isinstance(child.tag, str) and not child.tag.startswith("{")]


def test_from_start_and_since_from_the_cli_then_the_archive(tmp_path: Path) -> None:
    doc = tmp_path / "photons.xml"
    doc.write_text(photon_document(1600, seed=5))
    photons = items_of(doc.read_text())
    query = str(EXAMPLE_QUERIES / "q3.wxq")
    archive = tmp_path / "archive"
    # event time partitions the archive; no idle watermarks during the pause (they would make the
    # rest of the document late, for live subscribers as for these)
    # a replay of 100 items/s: the --from-start subscriber is told how far it has come (seven seconds)
    options = {"SP4": {"archive": ArchiveSettings(archive, span=40.0, samples="hybrid"), "watermark_idle_s": 600.0,
                       "replay_rate": 100.0}}
    with running_network(tmp_path, peer_options=options) as (topology, peers):
        sp4, sp1 = topology.address("SP4"), topology.address("SP1")
        r = run("publish", "--superpeer", sp4, "--stream", "photons", "--input", str(doc), "--count", "700",
                "--keep-open", "--event-time", "det_time")
        assert r.returncode == 0 and "stays open" in r.stderr, r.stderr
        time.sleep(3.0)  # the input: the first part is 3 s old when --since 1s is asked
        subscribers = [subprocess.Popen([*CLI, "subscribe", "--superpeer", sp1, "--query", query, *flag,
                                         "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, cwd=ROOT)
                       for flag in (["--from-start"], ["--since", "1s"])]
        client = SuperPeerClient(sp1)

        def installed() -> bool:  # (both planned, and the --from-start one's past fixed at the 700 items)
            subs = client.status()["subscriptions"]
            return (len(subs) == 2 and all(s["plan"] for s in subs.values())
                    and any(s["past"] for s in subs.values()))

        until(installed, what=lambda: str(client.status()["subscriptions"]))
        r = run("publish", "--superpeer", sp4, "--stream", "photons", "--input", str(doc), "--resume")
        assert r.returncode == 0 and "resuming at item 700" in r.stderr, r.stderr
        outputs = [p.communicate(timeout=120) for p in subscribers]
        query_text = Path(query).read_text()
        for (out, err), expected_from in zip(outputs, (0, 700)):
            expected = reference_results(query_text, photons[expected_from:])
            assert expected and same(items_of(out), expected), (expected_from, err[-2000:])
        told = [line for line in outputs[0][1].splitlines() if line.startswith("the past: photons: ")]
        assert told and "of 700 past items replayed" in told[0], outputs[0][1]
        assert "the past has been replayed (its last results follow): live from here on" in outputs[0][1], outputs[0][1]
        assert "the past:" not in outputs[1][1], outputs[1][1]  # (--since 1s: nothing of the past)
        peers["SP4"].node.archiver.drain()
    r = run("archive", "query", query, "--archive", str(archive))
    assert r.returncode == 0, r.stderr
    assert same(items_of(r.stdout), reference_results(Path(query).read_text(), photons))
    r = run("archive", "query", query, "--archive", str(archive), "--from", "40", "--to", "120")
    inside = [p for p in photons if 40 <= float(p.split("<det_time>")[1].split("<")[0]) < 120]
    assert r.returncode == 0 and same(items_of(r.stdout), reference_results(Path(query).read_text(), inside))
    r = run("archive", "query", query, "--archive", str(archive), "--from", "4000")
    assert r.returncode == 0 and "no archived item" in r.stderr and "event time" in r.stderr, r.stderr
    r = run("archive", "query", query, "--archive", str(archive), "--approximate")
    assert r.returncode == 0, r.stderr
    assert 'sample="1/64"' in r.stdout and "<sg:aggregate" in r.stdout and "1/64 sample" in r.stderr
    r = run("archive", "list", "--archive", str(archive))
    assert r.returncode == 0 and '"items": 1600' in r.stdout, r.stdout
    r = run("archive", "query", query, "--archive", str(tmp_path / "nowhere"))
    assert r.returncode != 0 and "no archive at" in r.stderr
