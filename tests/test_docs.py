"""Every example of the docs runs, as the docs show it (the README and ``docs/*.md``).

- A ```` ```xquery ```` block followed by an ```` ```output ```` block: the query, checked and run
  with the ``streamglobe`` command over ``docs/examples/photons.xml`` (or the example document of
  the stream it reads, ``docs/examples/alerts.xml``), gives exactly that output
  (its results, or its error with line and column). ``STREAMGLOBE_UPDATE_DOCS=1`` writes what the
  commands print into the output blocks instead (then read the diff).
- ```` ```python ```` blocks run in order, each a program of its own, and ```` ```bash ```` blocks
  run in order as one script, against a real network of the paper's example topology started for
  the document: the addresses the docs show (``127.0.0.1:5014N`` for SPN, those of ``network up
  --topology paper-example``) are replaced by the test network's. ```` ```sh ```` blocks are for
  reading only (installing, starting a network, containers).
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

import pytest
from network_harness import running_network

from thinpeer.cli.app import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
EXAMPLES = ROOT / "docs" / "examples"
STREAM = re.compile(r'stream\("([^"]+)"\)')
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
ADDRESS = re.compile(r"127\.0\.0\.1:5014(\d)")
UPDATE = os.environ.get("STREAMGLOBE_UPDATE_DOCS") == "1"


def blocks(path: Path) -> list[tuple[str, str, int, int, int]]:
    """(language, text, line, start, end) of every fenced block; start/end: the text's span."""
    text = path.read_text()
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1, m.start(2), m.end(2))
            for m in FENCE.finditer(text)]


def query_examples() -> list:
    out = []
    for path in [ROOT / "README.md", *DOCS]:
        found = blocks(path)
        for index, ((lang, query, line, _, _), nxt) in enumerate(itertools.pairwise(found)):
            if lang == "xquery" and nxt[0] == "output":
                out.append(pytest.param(path, index, query, id=f"{path.name}:{line}"))
    return out


def run_query(query: str, workdir: Path) -> str:
    """What ``query check`` then ``query run`` print, as a reader of the docs would see it."""
    (workdir / "query.wxq").write_text(query)
    out, err = StringIO(), StringIO()
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["query", "check", "query.wxq"])
            if code == 0:
                out.truncate(0)
                out.seek(0)
                named = STREAM.search(query)  # (over the example document of its stream: photons.xml …)
                document = EXAMPLES / f"{named.group(1) if named else 'photons'}.xml"
                code = main(["query", "run", "query.wxq", "--input", str(document)])
    finally:
        os.chdir(cwd)
    return (out.getvalue() if code == 0 else err.getvalue()).strip() + "\n"


@pytest.mark.parametrize(("path", "index", "query"), query_examples())
def test_query_examples_give_what_the_docs_show(path: Path, index: int, query: str, tmp_path: Path) -> None:
    """``index``: the query's block among the document's (line numbers move on an update)."""
    got = run_query(query, tmp_path)
    _, shown, line, start, end = blocks(path)[index + 1]
    if UPDATE and shown != got:
        text = path.read_text()
        path.write_text(text[:start] + got + text[end:])
        return
    assert shown == got, f"{path.name}:{line}: the docs show\n{shown}\nbut the command prints\n{got}"


def runnable_docs() -> list[Path]:
    return [p for p in [ROOT / "README.md", *DOCS] if any(b[0] in ("python", "bash") for b in blocks(p))]


@pytest.mark.slow
@pytest.mark.parametrize("path", runnable_docs(), ids=lambda p: p.name)
def test_python_and_shell_examples_run_against_a_real_network(path: Path, tmp_path: Path) -> None:
    with running_network(tmp_path, "paper-example.toml") as (topology, _):
        def local(text: str) -> str:
            return ADDRESS.sub(lambda m: topology.address(f"SP{m.group(1)}"), text)

        work = tmp_path / "work"
        work.mkdir()
        (work / "examples").symlink_to(ROOT / "examples")
        env = {**os.environ, "STREAMGLOBE_STATE_DIR": str(tmp_path / "state"),
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        env.pop("STREAMGLOBE_CA", None), env.pop("STREAMGLOBE_TOKEN", None)
        script: list[str] = []

        def run_script() -> None:  # the shell blocks since the last Python block, in one shell
            if script:
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(script)], cwd=work,
                                      env=env, capture_output=True, text=True, timeout=300)
                assert done.returncode == 0, f"{path.name}:\n{done.stdout}\n{done.stderr}"
                script.clear()

        for lang, text, line, _, _ in blocks(path):
            if lang == "python":
                run_script()
                done = subprocess.run([sys.executable, "-c", local(text)], cwd=work, env=env,
                                      capture_output=True, text=True, timeout=180)
                assert done.returncode == 0, f"{path.name}:{line}:\n{done.stdout}\n{done.stderr}"
            elif lang == "bash":
                script.append(f"# {path.name}:{line}\n{local(text)}")
        run_script()


def test_docs_link_only_inside_the_repository() -> None:
    """Every relative link of the docs reaches a file of the checkout; none leaves it."""
    link = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")
    for path in [ROOT / "README.md", *DOCS]:
        for target, _ in link.findall(path.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            resolved = (path.parent / target).resolve()
            assert resolved.is_relative_to(ROOT), f"{path.name}: {target} leaves the repository"
            assert resolved.exists(), f"{path.name}: {target} does not exist"
