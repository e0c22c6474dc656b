"""No import cycles anywhere in the project's packages: a module that imports another (at the top,
inside a function, or for type checking only) never ends up importing itself back. A cycle is
two modules that cannot be read, tested or moved apart; the fix is a third module both import,
or an interface owned by the lower one."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("wxquery", "sharing", "superpeer", "thinpeer", "photons", "proto", "streamglobe")


def module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def import_graph() -> nx.DiGraph:
    modules = {module_name(p)[0]: p for pkg in PACKAGES if (ROOT / pkg).is_dir()
               for p in sorted((ROOT / pkg).rglob("*.py"))}
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        is_package = path.name == "__init__.py"
        base = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                anchor = base[:len(base) - node.level + 1] if node.level else []
                source = ".".join([*anchor, *([node.module] if node.module else [])])
                targets = [f"{source}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:  # ``from a.b import name``: the module a.b
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph.add_edge(name, target)
    return graph


def test_the_graph_sees_the_imports():
    graph = import_graph()
    assert graph.has_edge("superpeer.node", "superpeer.control.control_plane")
    assert graph.has_edge("sharing.planner", "sharing.plans")


def test_no_module_imports_itself_back():
    cycles = sorted(nx.simple_cycles(import_graph()), key=len)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join([*c, c[0]]) for c in cycles[:20])


@pytest.mark.parametrize("package", ["superpeer", "sharing"])
def test_every_folder_is_a_package(package):
    """Sub-packages have an ``__init__.py`` (a folder without one is a namespace package that
    installs and imports differently)."""
    missing = [str(d.relative_to(ROOT)) for d in (ROOT / package).rglob("*")
               if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py")) and not (d / "__init__.py").exists()]
    assert not missing, missing
