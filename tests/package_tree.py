"""The deepseek_eks package as the wheel lays it out, without building a wheel: setuptools'
``build_py`` reads the same mapping (setup.py, pyproject.toml) that ``bdist_wheel`` packs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_tree(dest: Path) -> Path:
    """Copy the package (code and package data) into ``dest``, which then holds ``deepseek_eks/``
    and nothing else; returns ``dest``."""
    build = [sys.executable, "setup.py", "-q", "build_py", "-d", str(dest)]
    subprocess.run(build, cwd=ROOT, check=True, capture_output=True)
    return dest
