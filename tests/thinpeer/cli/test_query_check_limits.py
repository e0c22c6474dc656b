"""``streamglobe query check`` on deeply nested queries: a one-line error at the construct that
is too deep (it printed a RecursionError traceback from property extraction, or named wherever
the parser's stack ran out); ``query explain`` of a 4,000-atom chain answers at once (it ran for
minutes minimising the predicate graph)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from deep_queries import DEEP


def query(command: str, text: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "thinpeer.cli", "query", command, "-"],
                          input=text, capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("case, levels", [("constructors", 600), ("constructors", 980),
                                          ("enclosed", 450), ("parentheses", 980), ("flwrs", 600)])
def test_deep_nesting_is_a_positioned_error_not_a_traceback(case: str, levels: int):
    build, opener = DEEP[case]
    text = build(levels)
    r = query("check", text)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    m = re.fullmatch(r"-:1:(\d+): error: query is nested too deeply: (.*)\n", r.stderr)
    assert m, r.stderr
    assert text.startswith(opener, int(m.group(1)) - 1)


def test_a_4000_atom_chain_is_explained_at_once():
    atoms = " and ".join(f"$p/v{i} >= $p/v{i + 1} + 1" for i in range(4000))
    r = query("explain", f'<r>{{ for $p in stream("s")/s/i where {atoms} return $p/v0 }}</r>')
    assert r.returncode == 0, r.stderr[-2000:]
    selection = json.loads(r.stdout)["inputs"][0]["operators"][0]
    assert selection["op"] == "selection" and len(selection["graph"]["edges"]) == 4000
