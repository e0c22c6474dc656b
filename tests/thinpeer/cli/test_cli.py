"""The ``streamglobe`` console script, run as a user runs it (a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import write_event_list
from sharing.scenarios import EXAMPLE_QUERIES

from conftest import ROOT  # the checkout

pytestmark = pytest.mark.usefixtures("thin_peer_state")
Q = Path(str(EXAMPLE_QUERIES))  # the shipped examples (package data)


def sg(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "thinpeer.cli", *args], input=stdin,
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def photons(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "photons.xml"
    r = sg("photons", "generate", "--count", "2000", "--seed", "3")
    assert r.returncode == 0, r.stderr
    path.write_text(r.stdout)
    return path


def test_console_script_is_installed():
    r = subprocess.run(["streamglobe", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "query" in r.stdout and "photons" in r.stdout


def test_check_ok_and_error():
    r = sg("query", "check", str(Q / "q1.wxq"))
    assert (r.returncode, r.stdout.strip()) == (0, "ok")
    r = sg("query", "check", "-", stdin='<r>{ for $p in stream("s")/a/b\nwhere $p/x > 1 and $p/x != 0 return $p }</r>')
    assert r.returncode != 0
    assert r.stderr.strip() == ("-:2:25: error: '!=' compares strings only (a path with a string literal, or two "
                                "paths); compare numbers with =, <, <=, > or >=")


def test_check_missing_file_and_non_utf8(tmp_path):
    r = sg("query", "check", str(tmp_path / "nope.wxq"))
    assert r.returncode != 0 and "no such query file" in r.stderr
    bad = tmp_path / "latin1.wxq"
    bad.write_bytes(b"<r>\xe9</r>")
    r = sg("query", "check", str(bad))
    assert r.returncode != 0 and "not UTF-8" in r.stderr and "Traceback" not in r.stderr


def test_explain_prints_properties_json():
    r = sg("query", "explain", str(Q / "q3.wxq"))
    assert r.returncode == 0, r.stderr
    props = json.loads(r.stdout)
    ops = props["inputs"][0]["operators"]
    assert [o["op"] for o in ops] == ["selection", "projection", "window", "aggregate"]
    assert ops[2] == {"op": "window", "type": "diff", "size": "20", "step": "10", "ref": "det_time"}


def test_explain_shows_a_windows_keys():
    r = sg("query", "explain", "-", stdin='<r>{ for $w in stream("events")/events/event |time diff 1 by @ccd, chip| '
                                          'let $n := count($w) return <c>{ $w/@ccd }{ $w/chip }{ $n }</c> }</r>')
    assert r.returncode == 0, r.stderr
    (window,) = [o for o in json.loads(r.stdout)["inputs"][0]["operators"] if o["op"] == "window"]
    assert window == {"op": "window", "type": "diff", "size": "1", "step": "1", "ref": "time",
                      "key": "@ccd, chip", "keys": ["@ccd", "chip"]}


def test_run_query1(photons: Path):
    r = sg("query", "run", str(Q / "q1.wxq"), "--input", str(photons))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("<photons><vela><ra>") and r.stdout.rstrip().endswith("</photons>")


def test_run_from_stdin(photons: Path):
    r = sg("query", "run", str(Q / "q3.wxq"), "--input", "-", stdin=photons.read_text())
    assert r.returncode == 0 and "<avg_en>" in r.stdout


def test_run_malformed_input_gives_position_and_no_partial_document(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<photons>\n<photon><en>1</en></photon>\n<photon><en>2</photon>\n</photons>")
    r = sg("query", "run", str(Q / "q2.wxq"), "--input", str(bad))
    assert r.returncode != 0
    assert r.stdout == ""
    assert f"{bad}:3:" in r.stderr and "malformed XML" in r.stderr


def test_run_reports_dropped_late_items(tmp_path):
    doc = tmp_path / "late.xml"
    doc.write_text("<s><i><t>1</t></i><i><t>30</t></i><i><t>2</t></i></s>")
    q = tmp_path / "q.wxq"
    q.write_text('<r>{ for $w in stream("s")/s/i |t diff 10| return <n>{ count($w) }</n> }</r>')
    r = sg("query", "run", str(q), "--input", str(doc))
    assert r.returncode == 0 and r.stdout.strip() == "<r><n>1</n><n>1</n></r>"
    assert "1 item(s) arrived out of order" in r.stderr


def test_run_without_input_is_a_clear_error():
    r = sg("query", "run", str(Q / "q1.wxq"))
    assert r.returncode != 0 and "--input" in r.stderr


def test_generate_is_deterministic():
    a = sg("photons", "generate", "--count", "50", "--seed", "9").stdout
    b = sg("photons", "generate", "--count", "50", "--seed", "9").stdout
    assert a == b and a.count("<photon>") == 50
    assert sg("photons", "generate", "--count", "-1").returncode != 0


def test_from_fits(tmp_path):
    path = write_event_list(tmp_path / "evt.fits", n=120)
    r = sg("photons", "from-fits", str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("<photon>") == 120 and "120 photons from 120 events" in r.stderr
    r = sg("photons", "from-fits", str(tmp_path / "missing.fits"))
    assert r.returncode != 0 and "no such file" in r.stderr and "Traceback" not in r.stderr


def test_topology_by_shipped_name_or_file(tmp_path, monkeypatch):
    """--topology takes a file, or a shipped topology by name; an existing file wins."""
    from superpeer.topology import load_topology
    from thinpeer.ops.topologies import shipped_topologies, topology_path

    assert {"paper-example", "grid-4x4"} <= set(shipped_topologies())
    with topology_path("paper-example") as path:
        assert len(load_topology(path).backbone.peers) == 8
    with topology_path("grid-4x4.toml") as path:
        assert len(load_topology(path).backbone.peers) == 16
    local = tmp_path / "paper-example.toml"
    local.write_text('[[superpeer]]\nid = "A"\naddress = "127.0.0.1:1"\n')
    monkeypatch.chdir(tmp_path)
    with topology_path("paper-example.toml") as path:
        assert path == Path("paper-example.toml")
    # through the command: the shipped name loads (then the unknown id is refused), a missing
    # file is reported as before
    r = sg("superpeer", "serve", "--topology", "paper-example", "--id", "SP99")
    assert r.returncode == 1 and r.stderr.strip() == "error: SP99 is not a super-peer of the topology"
    r = sg("superpeer", "serve", "--topology", str(tmp_path / "nope.toml"), "--id", "SP0")
    assert r.returncode == 1 and r.stderr.strip() == f"error: {tmp_path / 'nope.toml'}: no such topology file"


def test_publish_missing_or_malformed_input_is_a_message(tmp_path):
    """Checked before any connection, so no super-peer is needed."""
    missing = tmp_path / "nope.xml"
    r = sg("publish", "--superpeer", "127.0.0.1:1", "--stream", "s", "--input", str(missing))
    assert r.returncode == 1 and r.stderr.strip() == f"{missing}: error: no such input file: {missing}"
    bad = tmp_path / "bad.xml"
    bad.write_text("<a>\n")
    r = sg("publish", "--superpeer", "127.0.0.1:1", "--stream", "s", "--input", str(bad))
    assert r.returncode == 1 and r.stderr.startswith(f"{bad}:2:1: error: malformed XML")


def test_resume_without_a_saved_offset_is_refused(thin_peer_state):
    """Before: a resume where no offset was saved (another working directory) silently started
    again at offset 0 and repeated every result already read. Refused before connecting."""
    r = sg("subscribe", "--superpeer", "127.0.0.1:1", "--resume", "SP1-0123abcd")
    assert r.returncode == 1
    assert r.stderr.strip() == (f"error: no saved offset for subscription SP1-0123abcd in "
                                f"{thin_peer_state / 'offsets'} (saved there by 'streamglobe "
                                "subscribe' for this user); give --offset N, the number of result "
                                "items already read")
    r = sg("subscribe", "--superpeer", "127.0.0.1:1", "--resume", "../../etc/passwd")
    assert r.returncode == 1 and "is not a subscription id" in r.stderr
    r = sg("subscribe", "--superpeer", "127.0.0.1:1", "--query", "q.wxq", "--count", "-1")
    assert r.returncode == 1 and r.stderr.strip() == "error: --count must be 0 or more, not -1"


def test_subscribe_confidence_needs_approximate_and_a_probability():
    """Refused before any super-peer is asked (none runs at this address)."""
    q = str(Q / "q1.wxq")
    r = sg("subscribe", "--superpeer", "127.0.0.1:9", "--query", q, "--confidence", "0.8")
    assert r.returncode != 0 and "--confidence is for --approximate" in r.stderr and "Traceback" not in r.stderr
    r = sg("subscribe", "--superpeer", "127.0.0.1:9", "--query", q, "--approximate", "--confidence", "95")
    assert r.returncode != 0 and "between 0 and 1, not 95.0" in r.stderr


def test_subscribe_min_rate_and_weight_need_approximate_and_a_sample_and_a_positive_weight():
    q = str(Q / "q1.wxq")
    r = sg("subscribe", "--superpeer", "127.0.0.1:9", "--query", q, "--min-rate", "1/8")
    assert r.returncode == 1 and "--min-rate and --weight are for --approximate" in r.stderr
    for bad, said in (("1/3", "'1/3' is not a sample of 1, 1/2, 1/4, … 1/64"), ("1/128", "'1/128' is not a sample"),
                      ("x", "'x' is not a sample")):
        r = sg("subscribe", "--superpeer", "127.0.0.1:9", "--query", q, "--approximate", "--min-rate", bad)
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = sg("subscribe", "--superpeer", "127.0.0.1:9", "--query", q, "--approximate", "--weight", "-1")
    assert r.returncode == 2 and "'-1' is not a positive number" in r.stderr
