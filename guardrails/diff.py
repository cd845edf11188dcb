"""``python -m automation diff --stack NAME --against REF``: the offline render of a stack at a git
ref next to the render of the working tree, as a unified diff a reviewer reads before an upgrade,
preceded by the upgrade-safety problems (URNs lost, replacing inputs changed) against REF's URN
snapshot.

``python -m automation diff --stack NAME --set KEY=VALUE``: the stack's program run offline with and
without the overrides, and what the change would create, replace (with the input or the Kubernetes
name that forces it) and delete, so a setting's cost (a computeMode switch above all) is seen before
anyone runs ``up``."""

from __future__ import annotations

import difflib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepseek_eks.automation.render import _prune, render, unwrap_secrets, write
from deepseek_eks.automation.stackfile import PROJECT_ROOT, read_stack
from deepseek_eks.testing.mocks import Recorded

from . import urns


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
                json.loads(old_snapshot.read_text()),
                urns.run_resources(config),
                urns.replace_on_change(),
                new_unreviewed=False,  # an upgrade may add resources: only deletes and replaces are unsafe
            )
    return lines, problems


@dataclass(frozen=True)
class Change:
    """One resource a setting change touches: ``create``, ``replace``, ``update`` or ``delete``."""

    action: str
    type: str
    name: str
    why: str = ""

    def __str__(self) -> str:
        return f"{self.action:<8} {self.type} {self.name}" + (f": {self.why}" if self.why else "")


def _kubernetes_identity(record: Recorded) -> tuple[str, Any, Any] | None:
    """What the API server keys an object by (type, namespace, name); a Helm release by its
    release name. None for anything that is not a Kubernetes object."""
    if not record.type.startswith("kubernetes:"):
        return None
    inputs = unwrap_secrets(record.inputs)
    if record.type == "kubernetes:helm.sh/v3:Release":
        return record.type, inputs.get("namespace"), inputs.get("name")
    metadata = inputs.get("metadata") or {}
    if not metadata.get("name"):
        return None
    return record.type, metadata.get("namespace"), metadata["name"]


def _matched(old: Recorded, new: Recorded, facts: dict[str, list[str]]) -> Change | None:
    """How ``new`` (the same URN, or aliased to it) differs from ``old``: a replacement when an input
    its provider cannot update changes (reference/upstream/replace-on-change.json), else an update."""
    fields = facts.get(new.type, [])
    was, now = urns.replacing_inputs(old, fields), urns.replacing_inputs(new, fields)
    forced = [
        f"{f} {json.dumps(was.get(f))} -> {json.dumps(now.get(f))}"
        for f in fields
        if was.get(f) != now.get(f)
    ]
    if forced:
        return Change("replace", new.type, new.name, f"the provider replaces it on {', '.join(forced)}")
    before, after = _prune(unwrap_secrets(old.inputs)), _prune(unwrap_secrets(new.inputs))
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return Change("update", new.type, new.name, f"inputs {', '.join(changed)}") if changed else None


def resource_changes(
    before: list[Recorded], after: list[Recorded], facts: dict[str, list[str]]
) -> list[Change]:
    """What going from the resources ``before`` to ``after`` does, in Pulumi's terms.

    A new URN holding a Kubernetes object of the same kind, namespace and name as a removed URN is
    a replacement that cannot succeed: Pulumi creates the new resource before it deletes the old
    one (its default; reference/upstream/compute-mode-switch.json), and the API server refuses a
    second object of that name (AlreadyExists)."""
    old_by_urn = {r.urn: r for r in before}
    changes: list[Change] = []
    created: list[Recorded] = []
    kept: set[str] = set()
    for record in after:
        old_urn = next((u for u in (record.urn, *record.aliases) if u in old_by_urn), None)
        if old_urn is None:
            created.append(record)
            continue
        kept.add(old_urn)
        if change := _matched(old_by_urn[old_urn], record, facts):
            changes.append(change)
    gone = {identity: r for r in before if r.urn not in kept and (identity := _kubernetes_identity(r))}
    replaced: set[str] = set()
    for record in created:
        twin = gone.get(_kubernetes_identity(record) or ("", None, None))
        if twin is None:
            changes.append(Change("create", record.type, record.name))
            continue
        replaced.add(twin.urn)
        _, namespace, name = _kubernetes_identity(record) or ("", None, None)
        where = f"{namespace}/{name}" if namespace else str(name)
        changes.append(
            Change(
                "replace",
                record.type,
                record.name,
                f"new URN for the Kubernetes name {where} that {twin.name} holds: created before "
                "the old one is deleted, it fails with AlreadyExists",
            )
        )
    changes += [Change("delete", r.type, r.name) for r in before if r.urn not in kept | replaced]
    order = {"replace": 0, "delete": 1, "create": 2, "update": 3}
    return sorted(changes, key=lambda c: (order[c.action], c.type, c.name))


MODE_SWITCH_FACTS = PROJECT_ROOT / "reference" / "upstream" / "compute-mode-switch.json"


def setting_report(stack: str, overrides: dict[str, str], project_dir: Path = PROJECT_ROOT) -> list[str]:
    """What applying ``overrides`` to ``stack``'s stack file would do, offline (both runs under the
    render's mocks, so provider-computed values are the mocks' and never differ), as lines: each
    change, a count, and for a computeMode switch the refusal ``up`` would give and its sources.
    Raises ``SettingsError`` when either configuration is invalid."""
    from deepseek_eks.automation.api import prepare
    from deepseek_eks.components.deployed_state import switch_refusal

    base, changed = prepare(stack, {}, project_dir), prepare(stack, overrides, project_dir)
    before, after = urns.run_resources(base.config), urns.run_resources(changed.config)
    changes = resource_changes(before, after, urns.replace_on_change())
    setting = ", ".join(f"{k}={v}" for k, v in overrides.items())
    lines = [f"{stack} with {setting}, against Pulumi.{stack}.yaml (offline):"]
    lines += [f"  {change}" for change in changes] or ["  no resource changes"]
    counts = {a: sum(c.action == a for c in changes) for a in ("create", "replace", "delete", "update")}
    lines.append("  " + ", ".join(f"{n} to {a}" for a, n in counts.items()))
    was, wanted = base.settings.compute_mode.value, changed.settings.compute_mode.value
    if refusal := switch_refusal(stack, was, wanted):
        lines.append(f"refused in place: {refusal}")
        facts = json.loads(MODE_SWITCH_FACTS.read_text())["facts"]
        lines += [f"  - {fact['statement']} ({fact['url']})" for fact in facts.values()]
    return [line + "\n" for line in lines]
