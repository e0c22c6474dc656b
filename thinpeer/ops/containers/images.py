"""The super-peer images, built from nothing (there is no image registry to pull from).

Three layers, each reused when it exists:

1. **base** (``streamglobe-base:bookworm``): a minimal Debian root made by ``debootstrap`` from
   Debian's mirror and imported with ``docker import``.
2. **deps** (``streamglobe-deps:<hash>``): Python 3.11, Java 17, iproute2/iptables and the Python
   dependencies. The wheels are built on the host with ``pip wheel`` (the host reaches PyPI; a
   container behind a TLS-intercepting proxy would not trust it) and installed offline. The tag
   is a hash of the dependency list and the Dockerfile, so a changed dependency makes a new one.
3. **app** (``streamglobe:<version>``): StreamGlobe's packages, copied from where Python imports
   them (a checkout or an installed package alike). A source-only change rebuilds this layer only,
   in seconds.
"""

from __future__ import annotations

import hashlib
import re
import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Callable

from thinpeer.ops.launcher import LaunchError

BASE_IMAGE = "streamglobe-base:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("streamglobe", "wxquery", "sharing", "superpeer", "thinpeer", "photons", "proto")
DOCKER_FILES = resources.files("thinpeer") / "data" / "docker"

Progress = Callable[[str], None]


class DeployError(LaunchError):
    """A deployment step failed; the message says which and why (the container launcher's
    ``LaunchError``)."""


def run(cmd: list[str], progress: Progress | None = None, **kwargs) -> subprocess.CompletedProcess:
    """Run a tool; a failure raises with its last lines of output, not a traceback."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    except FileNotFoundError:
        raise DeployError(f"{cmd[0]} is not installed (needed for: {' '.join(cmd[:3])} …)") from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise DeployError(f"{' '.join(cmd[:4])} … failed (exit {done.returncode}):\n{tail}")
    return done


def image_exists(name: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", name], capture_output=True).returncode == 0


def version() -> str:
    try:
        return importlib.metadata.version("streamglobe")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


def app_image() -> str:
    return f"streamglobe:{version()}"


CONTAINER_EXTRAS = ("superpeer", "spark")  # what a super-peer in a container runs


def requirements() -> list[str]:
    """What a super-peer's container needs, as the installed distribution declares it: the base
    dependencies and those of ``CONTAINER_EXTRAS`` (markers dropped; the extras' references to
    the package itself are the other extras)."""
    try:
        declared = importlib.metadata.requires("streamglobe") or []
    except importlib.metadata.PackageNotFoundError:
        raise DeployError("streamglobe is not installed (pip install -e '.[all]' first)") from None
    out = set()
    for requirement in declared:
        spec, _, marker = requirement.partition(";")
        extra = re.search(r"extra\s*==\s*['\"]([\w-]+)['\"]", marker)
        if (extra is None or extra.group(1) in CONTAINER_EXTRAS) and not spec.strip().startswith("streamglobe"):
            out.add(spec.strip())
    return sorted(out)


def deps_image() -> str:
    digest = hashlib.sha256("\n".join(requirements()).encode()
                            + (DOCKER_FILES / "deps.Dockerfile").read_bytes()).hexdigest()[:12]
    return f"streamglobe-deps:{digest}"


def build_base(progress: Progress) -> None:
    if image_exists(BASE_IMAGE):
        return
    if shutil.which("debootstrap") is None:
        progress("installing debootstrap (apt-get)")
        run(["apt-get", "update", "-qq"])
        run(["apt-get", "install", "-y", "-qq", "debootstrap"])
    with tempfile.TemporaryDirectory(prefix="sg-rootfs-") as root:
        progress(f"debootstrap --variant=minbase bookworm from {DEBIAN_MIRROR} (~1 min)")
        run(["debootstrap", "--variant=minbase", "bookworm", root, DEBIAN_MIRROR])
        progress(f"importing {BASE_IMAGE}")
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        try:
            run(["docker", "import", "-", BASE_IMAGE], stdin=tar.stdout)
        finally:
            tar.wait()


def build_deps(progress: Progress) -> str:
    name = deps_image()
    if image_exists(name):
        return name
    with tempfile.TemporaryDirectory(prefix="sg-deps-") as ctx:
        wheels = Path(ctx) / "wheels"
        progress("building the dependency wheels on the host (pip wheel)")
        run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheels), *requirements()])
        shutil.copy(str(DOCKER_FILES / "deps.Dockerfile"), Path(ctx) / "Dockerfile")
        progress(f"building {name} (Python, Java 17, dependencies; ~2 min)")
        run(["docker", "build", "--build-arg", f"BASE={BASE_IMAGE}", "-t", name, ctx])
    return name


def build_app(progress: Progress, deps: str) -> str:
    name = app_image()
    with tempfile.TemporaryDirectory(prefix="sg-app-") as ctx:
        src = Path(ctx) / "src"
        for package in PACKAGES:
            spec = importlib.util.find_spec(package)
            if spec is None or not spec.submodule_search_locations:
                raise DeployError(f"cannot find the package {package} to put into the image")
            shutil.copytree(list(spec.submodule_search_locations)[0], src / package,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name_ in ("app.Dockerfile", "entrypoint.sh", "spark.sh", "healthcheck.py"):
            shutil.copy(str(DOCKER_FILES / name_), Path(ctx) / ("Dockerfile" if name_ == "app.Dockerfile" else name_))
        progress(f"building {name}")
        run(["docker", "build", "--build-arg", f"DEPS={deps}", "-t", name, ctx])
    return name


def build_images(progress: Progress) -> str:
    """Every layer that is missing, then the application image (always: it is seconds)."""
    build_base(progress)
    return build_app(progress, build_deps(progress))
