"""The upgrade baseline: each stack file's render (``kubernetes/*.yaml``), committed under
tests/snapshots/render/<stack>/ and updated like the URN snapshots (reviewed, on purpose), so
``twin check --previous`` judges today's render as an update of the last reviewed one."""

from __future__ import annotations

import filecmp
import shutil
import tempfile
from pathlib import Path

from ..render import render, write
from ..stackfile import PROJECT_ROOT, read_stack, stack_names

SNAPSHOT_DIR = PROJECT_ROOT / "tests" / "snapshots" / "render"


def render_stack(stack: str, out: Path) -> Path:
    """Render ``stack`` offline into ``out/<stack>`` and return that folder."""
    return write(render(read_stack(stack)), out)


def _differences(fresh: Path, committed: Path) -> list[str]:
    new, old = fresh / "kubernetes", committed / "kubernetes"
    names = {p.name for p in new.glob("*.yaml")} | {p.name for p in old.glob("*.yaml")}
    return sorted(
        n
        for n in names
        if not (old / n).exists()
        or not (new / n).exists()
        or not filecmp.cmp(new / n, old / n, shallow=False)
    )


def sync(update: bool, stacks: list[str] | None = None) -> dict[str, list[str]]:
    """The changed files of each stack's render against its snapshot; with ``update``, the
    snapshot is rewritten (its ``kubernetes/`` folder only: that is what the twin reads)."""
    changed = {}
    with tempfile.TemporaryDirectory(prefix="deepseek-eks-render-") as temp:
        for stack in stacks or stack_names():
            fresh = render_stack(stack, Path(temp))
            committed = SNAPSHOT_DIR / stack
            changed[stack] = _differences(fresh, committed)
            if update and changed[stack]:
                shutil.rmtree(committed, ignore_errors=True)
                committed.mkdir(parents=True)
                shutil.copytree(fresh / "kubernetes", committed / "kubernetes")
    return changed
