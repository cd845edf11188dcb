"""``python -m automation diff --stack NAME --against REF``: the offline render of a stack at a git
ref next to the render of the working tree, as a unified diff a reviewer reads before an upgrade,
preceded by the upgrade-safety problems (URNs lost, replacing inputs changed) against REF's URN
snapshot."""

from __future__ import annotations

import difflib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from . import urns
from .render import render, write
from .stackfile import PROJECT_ROOT, read_stack


class DiffError(RuntimeError):
    """The ref cannot be read or rendered."""


def _export(ref: str, repo: Path, into: Path) -> None:
    """Write the tree of ``ref`` under ``into`` (committed files only)."""
    proc = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", ref], capture_output=True)
    if proc.returncode != 0:
        raise DiffError(f"git cannot read ref {ref!r}: {proc.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(into, filter="data")


def render_at(ref: str, stack: str, out: Path, repo: Path = PROJECT_ROOT) -> tuple[Path, Path]:
    """Render ``stack`` with the program and stack file of ``ref``; returns (render, tree)."""
    tree = out / "tree"
    tree.mkdir(parents=True)
    _export(ref, repo, tree)
    proc = subprocess.run(
        [sys.executable, "-m", "automation", "render", "--stack", stack, "--out", str(out / "render")],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise DiffError(f"rendering {stack!r} at {ref} failed:\n{proc.stderr.strip()}")
    return out / "render" / stack, tree


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def unified(old: Path, new: Path, old_label: str, new_label: str) -> list[str]:
    """A unified diff of two render folders, file by file (added and removed files in full)."""
    before, after = _files(old), _files(new)
    lines: list[str] = []
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name, ""), after.get(name, "")
        if a != b:
            lines.extend(
                difflib.unified_diff(
                    a.splitlines(keepends=True),
                    b.splitlines(keepends=True),
                    fromfile=f"{old_label}/{name}" if name in before else "/dev/null",
                    tofile=f"{new_label}/{name}" if name in after else "/dev/null",
                )
            )
    return [line if line.endswith("\n") else line + "\n" for line in lines]


def diff(stack: str, ref: str, project_dir: Path = PROJECT_ROOT) -> tuple[list[str], list[urns.Problem]]:
    """The render diff of ``stack`` from ``ref`` to the working tree, and the upgrade-safety
    problems against the URN snapshot committed at ``ref`` (none when ``ref`` has no snapshot)."""
    with tempfile.TemporaryDirectory(prefix="deepseek-eks-diff-") as tmp:
        old_render, old_tree = render_at(ref, stack, Path(tmp) / "old", project_dir)
        config = read_stack(stack, project_dir)
        new_render = write(render(config), Path(tmp) / "new")
        lines = unified(old_render, new_render, f"a/{ref}", "b/worktree")
        old_snapshot = urns.snapshot_path(stack, old_tree / urns.SNAPSHOT_DIR.relative_to(PROJECT_ROOT))
        problems: list[urns.Problem] = []
        if old_snapshot.exists():
            problems = urns.check(
                json.loads(old_snapshot.read_text()), urns.run_resources(config), urns.replace_on_change()
            )
    return lines, problems
