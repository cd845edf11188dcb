"""The deepseek_eks package as the wheel lays it out, without building a wheel: setuptools'
``build_py`` reads the same mapping (setup.py, pyproject.toml) that ``bdist_wheel`` packs."""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """Held while setuptools builds from the checkout: it writes build/ and the egg-info there,
    so two test processes (``make test`` runs several) building at once would mix their files."""
    (ROOT / "build").mkdir(exist_ok=True)
    with open(ROOT / "build" / ".tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def package_tree(dest: Path) -> Path:
    """Copy the package (code and package data) into ``dest``, which then holds ``deepseek_eks/``
    and nothing else; returns ``dest``."""
    build = [sys.executable, "setup.py", "-q", "build_py", "-d", str(dest)]
    with build_lock():
        subprocess.run(build, cwd=ROOT, check=True, capture_output=True)
    return dest
