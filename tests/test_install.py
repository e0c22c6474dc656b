"""The package installs as a package: ``pip install`` (not ``-e``) of this tree into a fresh venv,
then the console script runs from an unrelated directory, where nothing of the checkout is
importable — so the demo, ``simulate`` and ``query run`` must find their shipped files as
package data.

The venv is a plain one (no system site-packages): the editable install of the checkout cannot
leak in. Dependencies come through pip's cache; the whole module takes about a minute.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sharing.analysis import analyze
from sharing.scenarios import example_query
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parent.parent
# Build inputs only: a copy keeps pip's in-tree build (build/, *.egg-info) out of the checkout.
NOT_SOURCES = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build", "dist",
                                     ".pytest_cache", ".hypothesis", ".streamglobe", "tests",
                                     "benchmarks", "out")


class Installed:
    """A venv with the package installed, and a way to run its console script elsewhere."""

    def __init__(self, venv: Path, workdir: Path) -> None:
        self.venv = venv
        self.workdir = workdir
        self.env = {k: v for k, v in os.environ.items()
                    if k not in {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"}}
        # not activated: the venv's commands run by their full path, with a PATH that has neither
        # it nor any other ``streamglobe`` or pyenv Python on it (what they start must find its own)
        self.env["PATH"] = os.pathsep.join(
            d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and "pyenv" not in d and not (Path(d) / "streamglobe").exists())

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(args, capture_output=True, text=True, cwd=self.workdir,
                              env=self.env, timeout=timeout)

    def streamglobe(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return self.run(str(self.venv / "bin" / "streamglobe"), *args, timeout=timeout)

    def python(self, code: str) -> str:
        r = self.run(str(self.venv / "bin" / "python"), "-c", code)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()


def install(base: Path, extras: str = "") -> Installed:
    """A fresh venv under ``base`` with this tree installed (``extras``: e.g. ``[all]``), run
    from a directory of its own."""
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES, symlinks=True)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    workdir = base / "elsewhere"
    workdir.mkdir()
    target = Installed(venv, workdir)
    # --no-compile: byte-compiling pyspark and friends is most of an install's time; the few
    # modules the commands import compile on first use.
    r = target.run(str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                   "--disable-pip-version-check", "--no-compile", f"{source}{extras}", timeout=780)
    assert r.returncode == 0, f"pip install failed:\n{r.stdout}\n{r.stderr}"
    shutil.rmtree(source)  # nothing may still read the copied tree
    return target


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    return install(tmp_path_factory.mktemp("install"), "[all]")


@pytest.fixture(scope="module")
def thin(tmp_path_factory) -> Installed:
    """The base install alone: a thin peer (no super-peer, no Spark, no web view)."""
    return install(tmp_path_factory.mktemp("thin"))


def test_a_thin_peer_alone_publishes_and_subscribes(thin: Installed, tmp_path):
    from network_harness import reference_results, running_network

    for module in ("numpy", "networkx", "pyspark", "pyarrow", "pandas", "matplotlib", "astropy", "starlette"):
        assert thin.python(f"import importlib.util; print(importlib.util.find_spec({module!r}))") == "None"
    from photons.generator import generate

    items = [p.to_xml() for p in generate(600, seed=2)]
    photons = thin.workdir / "photons.xml"
    photons.write_text("<photons>" + "".join(items) + "</photons>")
    q1 = thin.workdir / "q1.wxq"
    q1.write_text(example_query("q1"))
    with running_network(tmp_path) as (topology, _):
        said = thin.streamglobe("subscribe", "--superpeer", topology.address("SP1"), "--query", str(q1),
                                "--count", "0", "--json")
        assert said.returncode == 0, said.stderr
        sid = json.loads(said.stdout)["subscription"]
        r = thin.streamglobe("publish", "--superpeer", topology.address("SP4"), "--stream", "photons",
                             "--input", str(photons))
        assert r.returncode == 0, r.stderr
        r = thin.streamglobe("subscribe", "--superpeer", topology.address("SP1"), "--resume", sid,
                             "--format", "lines", "--timeout", "60")
        assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == reference_results(example_query("q1"), items)


def test_a_command_of_a_missing_extra_says_which_to_install(thin: Installed):
    r = thin.streamglobe("superpeer", "serve", "--topology", "paper-example", "--id", "SP4", "--insecure")
    assert r.returncode == 1
    assert "pip install 'streamglobe[superpeer]'" in r.stderr and "Traceback" not in r.stderr
    query = thin.workdir / "q3.wxq"
    query.write_text(example_query("q3"))
    r = thin.streamglobe("query", "check", str(query))  # (the local query tools are the super-peer's)
    assert r.returncode == 1 and "pip install 'streamglobe[superpeer]'" in r.stderr


def test_imports_resolve_inside_the_venv(installed: Installed):
    site = installed.python("import sysconfig; print(sysconfig.get_paths()['purelib'])")
    for package in ("streamglobe", "wxquery", "sharing", "superpeer", "thinpeer", "photons", "proto"):
        where = installed.python(f"import {package}; print({package}.__file__)")
        assert where.startswith(site), (package, where)


def test_simulate_paper_example(installed: Installed):
    out = installed.workdir / "sim"
    r = installed.streamglobe("simulate", "paper-example", "--photons", "1000", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "paper-example" in r.stdout and "sharing" in r.stdout
    assert (out / "report.json").is_file()
    assert sorted(p.name for p in out.glob("*.png")) == ["paper-example-figure6.png",
                                                         "paper-example-figure7.png"]


def test_query_run_on_a_shipped_example(installed: Installed):
    r = installed.streamglobe("photons", "generate", "--count", "2000", "--seed", "3")
    assert r.returncode == 0, r.stderr
    photons = installed.workdir / "photons.xml"
    photons.write_text(r.stdout)
    q1 = installed.python("from sharing.scenarios import EXAMPLE_QUERIES; "
                          "print(EXAMPLE_QUERIES / 'q1.wxq')")
    assert q1.startswith(str(installed.venv)), q1
    r = installed.streamglobe("query", "run", q1, "--input", str(photons))
    assert r.returncode == 0, r.stderr
    expected = evaluate(analyze(example_query("q1")).checked, StreamDocument.from_file(photons))
    assert r.stdout == expected.document() + "\n"
    assert r.stdout.startswith("<photons><vela><ra>")


def test_shipped_topology_by_name(installed: Installed):
    r = installed.streamglobe("superpeer", "serve", "--topology", "grid-4x4", "--id", "SP99")
    assert r.returncode == 1 and r.stderr.strip() == "error: SP99 is not a super-peer of the topology"


def test_demo(installed: Installed):
    r = installed.streamglobe("demo", "--photons", "1500")
    assert r.returncode == 0, r.stderr
    for n, peer in ((1, "SP1"), (2, "SP7"), (3, "SP0"), (4, "SP6")):
        assert f"Query {n} registered at {peer}" in r.stdout, r.stdout
        assert f"Query {n}: " in r.stdout, r.stdout
    assert r.stdout.count("; route SP") >= 4  # the plans
    for text in ("reuse stream", "Traffic per link", "Network stopped."):
        assert text in r.stdout, r.stdout


def test_web_view_serves_its_page_from_the_installed_package(installed: Installed):
    """``streamglobe ui`` with no network behind it: the page, its script and Plotly's bundle
    still come from the installed wheel, and the API says why there is nothing to show."""
    import json
    import time
    import urllib.request

    from thinpeer.ops.ports import free_ports

    port, nobody = free_ports(2)
    ui = subprocess.Popen([str(installed.venv / "bin" / "streamglobe"), "ui", "--superpeer",
                           f"127.0.0.1:{nobody}", "--port", str(port), "--ca", "", "--token", ""],
                          cwd=installed.workdir, env=installed.env, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                page = urllib.request.urlopen(base + "/", timeout=5).read().decode()
                break
            except OSError:
                assert ui.poll() is None and time.monotonic() < deadline, ui.stderr.read() if ui.poll() else "timeout"
                time.sleep(0.2)
        assert "network.js" in page
        for asset in ("/static/network.js", "/static/style.css", "/vendor/plotly.min.js"):
            assert urllib.request.urlopen(base + asset, timeout=5).status == 200, asset
        while "cannot read the backbone" not in (error := json.load(urllib.request.urlopen(base + "/api/network"))
                                                 .get("error", "")):
            assert time.monotonic() < deadline, error
            time.sleep(0.2)
        assert f"127.0.0.1:{nobody}" in error
    finally:
        ui.terminate()
        ui.wait(10)


def test_demo_on_spark_run_by_full_path_from_an_unactivated_venv(installed: Installed):
    """The daemons, the Spark driver and its Python workers all find the venv's own Python
    and packages with nothing of the venv on ``PATH``."""
    r = installed.streamglobe("demo", "--photons", "600", "--executor", "spark", timeout=900)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    for n in (1, 2, 3, 4):
        assert f"Query {n}: " in r.stdout, r.stdout
    assert "Network stopped." in r.stdout
