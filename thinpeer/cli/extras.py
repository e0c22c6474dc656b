"""Which optional part of the install a command needs, said when it is missing.

The base install is a thin peer (``pyproject.toml``); a super-peer, the local query tools, Spark,
the web view, FITS input and plots each come with an extra. A command that reaches for a module
of an extra that is not installed ends with the ``pip install`` line that adds it, not with a
traceback.
"""

from __future__ import annotations

# the top-level module → the extra that brings it
EXTRA_OF = {
    "networkx": "superpeer", "numpy": "superpeer", "pyarrow": "superpeer", "pandas": "superpeer",
    "prometheus_client": "superpeer", "grpc_health": "superpeer", "grpc_reflection": "superpeer",
    "pyspark": "spark", "py4j": "spark",
    "starlette": "web", "uvicorn": "web", "plotly": "web",
    "astropy": "fits",
    "matplotlib": "plots",
}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The message for a module of an extra that is not installed (None: not one of ours)."""
    module = (exc.name or "").split(".")[0]
    extra = EXTRA_OF.get(module)
    if extra is None:
        return None
    return (f"error: this needs the '{extra}' part of StreamGlobe, which is not installed (no module "
            f"{module!r}): pip install 'streamglobe[{extra}]' (or 'streamglobe[all]')")
