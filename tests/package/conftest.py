"""The built wheel and a fresh venv holding it, made once per test session (building takes seconds,
and several test files install it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.package.test_packaging import _build_wheel


@pytest.fixture(scope="session")
def package_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the checkout."""
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def package_venv(package_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the checkout with the wheel installed (its dependencies are the tested
    ones, through PYTHONPATH: no network)."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            str(package_wheel),
        ],
        check=True,
        capture_output=True,
    )
    return root
