"""mypy over the ``deepseek_eks`` package as the wheel lays it out, its findings at the checkout's
paths (``make typecheck``; ``python tools/typecheck.py [mypy options]``).

The checkout's folders are the package's subpackages only through setup.py's mapping, which the
editable install serves with an import hook mypy cannot follow: a bare ``python -m mypy`` would find
no ``deepseek_eks.components`` and, with ``ignore_missing_imports``, check nothing of it. So this
copies the package as the wheel would hold it (setuptools' ``build_py``, from the same mapping) into
build/typecheck/, runs mypy there with pyproject.toml's settings, and maps each reported file back
(build/typecheck/deepseek_eks/sizing/planner.py -> sizing/planner.py). Exit status: mypy's.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "typecheck"
PACKAGE = "deepseek_eks"
_REPORTED = re.compile(rf"^({PACKAGE}/[^:\s]+\.pyi?)(?=:)", re.M)


def checkout_path(packaged: str) -> str:
    """The checkout's file for a path inside the package (``deepseek_eks/<folder>/...`` ->
    ``<folder>/...`` for a mapped folder; the package's own files stay where they are)."""
    parts = Path(packaged).parts
    if len(parts) > 2 and not (ROOT / PACKAGE / parts[1]).exists() and (ROOT / parts[1]).is_dir():
        return str(Path(*parts[1:]))
    return packaged


def build_tree() -> None:
    shutil.rmtree(TREE, ignore_errors=True)  # a file deleted or renamed since must not linger
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "-d", str(TREE)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )


def main(argv: list[str] | None = None) -> int:
    build_tree()
    config = ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(ROOT / ".mypy_cache")]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", *config, *(sys.argv[1:] if argv is None else argv), PACKAGE],
        cwd=TREE,
        capture_output=True,
        text=True,
    )
    sys.stdout.write(_REPORTED.sub(lambda m: checkout_path(m[1]), result.stdout))
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
