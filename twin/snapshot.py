"""The upgrade baseline: each stack file's render (``kubernetes/*.yaml``, and of each Helm release
only what the twin reads: its namespace and whether Helm creates it), committed under
tests/snapshots/render/<stack>/ and updated like the URN snapshots (reviewed, on purpose), so
``twin check --previous`` judges today's render as an update of the last reviewed one."""

from __future__ import annotations

import filecmp
import shutil
import tempfile
from pathlib import Path

import yaml

from deepseek_eks.automation.render import render, write
from deepseek_eks.automation.stackfile import PROJECT_ROOT, read_stack, stack_names

SNAPSHOT_DIR = PROJECT_ROOT / "tests" / "snapshots" / "render"


def render_stack(stack: str, out: Path) -> Path:
    """Render ``stack`` offline into ``out/<stack>`` and return that folder."""
    return write(render(read_stack(stack)), out)


def _helm_namespaces(render: Path, out: Path) -> None:
    """Each release's ``namespace`` and ``create_namespace`` (what twin/check.py reads
    of ``helm/``), without the chart's values."""
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted((render / "helm").glob("*.yaml")):
        release = yaml.safe_load(path.read_text()) or {}
        kept = {k: release[k] for k in ("namespace", "create_namespace") if k in release}
        (out / path.name).write_text(yaml.safe_dump(kept, sort_keys=True))


def _differences(fresh: Path, committed: Path) -> list[str]:
    names = {
        str(p.relative_to(root))
        for root in (fresh, committed)
        for folder in ("kubernetes", "helm")
        for p in (root / folder).glob("*.yaml")
    }
    return sorted(
        n
        for n in names
        if not (committed / n).exists()
        or not (fresh / n).exists()
        or not filecmp.cmp(fresh / n, committed / n, shallow=False)
    )


def sync(update: bool, stacks: list[str] | None = None) -> dict[str, list[str]]:
    """The changed files (``kubernetes/...``, ``helm/...``) of each stack's render against its
    snapshot; with ``update``, the snapshot is rewritten."""
    changed = {}
    with tempfile.TemporaryDirectory(prefix="deepseek-eks-render-") as temp:
        for stack in stacks or stack_names():
            rendered = render_stack(stack, Path(temp) / "full")
            fresh = Path(temp) / "snapshot" / stack
            shutil.copytree(rendered / "kubernetes", fresh / "kubernetes")
            _helm_namespaces(rendered, fresh / "helm")
            committed = SNAPSHOT_DIR / stack
            changed[stack] = _differences(fresh, committed)
            if update and changed[stack]:
                shutil.rmtree(committed, ignore_errors=True)
                shutil.copytree(fresh, committed)
    return changed
