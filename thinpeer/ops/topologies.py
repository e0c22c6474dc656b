"""Shipped topologies and the name-or-path rule of every ``--topology`` option.

The topologies ship as package data (``thinpeer/data/topologies``) so that ``streamglobe demo``
and ``network up --topology paper-example`` work from an installed package, run from any
directory. A ``--topology`` value names an existing file, or else a shipped topology.
"""

from __future__ import annotations

from contextlib import contextmanager
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Iterator

SHIPPED: Traversable = resources.files("thinpeer") / "data" / "topologies"


def shipped_topologies() -> list[str]:
    """Names of the shipped topologies (``grid-4x4``, ``paper-example``)."""
    return sorted(p.name.removesuffix(".toml") for p in SHIPPED.iterdir() if p.name.endswith(".toml"))


def shipped_topology(name: str) -> Traversable:
    """The shipped topology ``name`` (with or without ``.toml``)."""
    name = name.removesuffix(".toml")
    if name not in shipped_topologies():
        raise KeyError(f"no shipped topology {name!r}; there are {', '.join(shipped_topologies())}")
    return SHIPPED / f"{name}.toml"


@contextmanager
def topology_path(spec: str | Path) -> Iterator[Path]:
    """A file to read for a ``--topology`` value, valid inside the ``with`` block.

    An existing file wins, so a local ``paper-example.toml`` is never shadowed by the shipped one;
    a bare name (``paper-example`` or ``paper-example.toml``) that is not a file selects the shipped
    topology; anything else comes back unchanged, so that the loader reports it as missing with the
    same message as before shipped names existed.
    """
    path = Path(spec)
    bare = path.name == str(spec)
    if not path.is_file() and bare and path.name.removesuffix(".toml") in shipped_topologies():
        # as_file: a real path even if the package were imported from a zip. The daemons that
        # `network up` starts read it by path, so that command keeps the block open while they run.
        with resources.as_file(shipped_topology(path.name)) as shipped:
            yield shipped
        return
    yield path
