"""Upgrade safety: a committed snapshot of every example stack's resource URNs, and the check that
a change keeps running resources (no rename or re-parent without an alias; no replacement of a
stateful resource through an input its provider cannot update in place).

The snapshot is written only by ``python -m automation urns --update`` (``make urns``); the test
compares against it and never rewrites it, so a reviewer sees every URN change in the diff.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepseek_eks.automation.render import _prune, construct, unwrap_secrets
from deepseek_eks.automation.stackfile import PROJECT_ROOT, StackConfig, read_stack, stack_names
from deepseek_eks.testing.mocks import Recorded

SNAPSHOT_DIR = PROJECT_ROOT / "tests" / "snapshots"
REPLACE_FACTS = PROJECT_ROOT / "reference" / "upstream" / "replace-on-change.json"
UPDATE_HINT = "python -m automation urns --update"


def snapshot_path(stack: str, root: Path = SNAPSHOT_DIR) -> Path:
    return root / f"{stack}.urns.json"


def replace_on_change(path: Path = REPLACE_FACTS) -> dict[str, list[str]]:
    """Per type token, the inputs whose change replaces the resource (read from the provider
    sources snapshotted in ``reference/upstream/replace-on-change.json``)."""
    types = json.loads(path.read_text())["types"]
    return {token: list(entry["fields"]) for token, entry in types.items()}


def _at(inputs: dict[str, Any], dotted: str) -> Any:
    value: Any = inputs
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def replacing_inputs(record: Recorded, fields: list[str]) -> dict[str, Any]:
    """The values of ``fields`` in the resource's inputs (secrets masked, unset left out)."""
    inputs = _prune(unwrap_secrets(record.inputs))
    return {f: v for f in fields if (v := _at(inputs, f)) is not None}


def snapshot(resources: Iterable[Recorded], facts: dict[str, list[str]]) -> dict[str, Any]:
    """The stable part of a run: each resource's URN, type, name and parent, plus, for stateful
    types, the inputs that would replace it."""
    entries = []
    for record in sorted(resources, key=lambda r: r.urn):
        entry: dict[str, Any] = {"urn": record.urn, "type": record.type, "name": record.name}
        entry["parent"] = record.parent
        if record.type in facts:
            entry["replaceOnChange"] = replacing_inputs(record, facts[record.type])
        entries.append(entry)
    return {"resources": entries}


@dataclass(frozen=True)
class Problem:
    """One unsafe change against the snapshot, with what to do about it."""

    urn: str
    message: str

    def __str__(self) -> str:
        return f"{self.urn}: {self.message}"


def check(
    old: dict[str, Any],
    resources: list[Recorded],
    facts: dict[str, list[str]],
    *,
    new_unreviewed: bool = True,
) -> list[Problem]:
    """Compare a run with the committed snapshot ``old``.

    Fails when an old URN is neither present nor an alias of a present resource (the engine would
    delete it and create the new one), when a stateful resource's replacing input changed, and
    (``new_unreviewed``: the snapshot check of the working tree) when a new URN is not in the
    snapshot yet, so it is reviewed and protected from then on. An upgrade from an older snapshot
    (``diff --against``) creates new resources safely: there they are not problems.
    """
    by_urn = {r.urn: r for r in resources}
    by_alias = {alias: r for r in resources for alias in r.aliases}
    problems = []
    old_urns = set()
    for entry in old["resources"]:
        urn = entry["urn"]
        old_urns.add(urn)
        current = by_urn.get(urn) or by_alias.get(urn)
        if current is None:
            problems.append(
                Problem(
                    urn,
                    "gone, and no resource lists it in aliases: a renamed or re-parented resource is "
                    "deleted and re-created. Add pulumi.ResourceOptions(aliases=[...]) naming the old "
                    f"name/parent, or, if it is removed on purpose, run `{UPDATE_HINT}` and review",
                )
            )
            continue
        fields = facts.get(current.type)
        if fields is None or "replaceOnChange" not in entry:
            continue
        now = replacing_inputs(current, fields)
        was = entry["replaceOnChange"]
        for field in fields:
            if was.get(field) != now.get(field):
                problems.append(
                    Problem(
                        urn,
                        f"input {field!r} changed ({json.dumps(was.get(field))} -> "
                        f"{json.dumps(now.get(field))}); the provider replaces a {current.type} on that "
                        "(reference/upstream/replace-on-change.json), destroying the running one",
                    )
                )
    for record in resources if new_unreviewed else []:
        if record.urn not in old_urns and not old_urns.intersection(record.aliases):
            problems.append(Problem(record.urn, f"new resource, not in the snapshot: run `{UPDATE_HINT}`"))
    return problems


def run_resources(config: StackConfig) -> list[Recorded]:
    """Every resource ``build`` registers for ``config`` under the offline mocks."""
    return construct(config).mocks.resources


def stack_snapshot(stack: str, project_dir: Path = PROJECT_ROOT) -> dict[str, Any]:
    return snapshot(run_resources(read_stack(stack, project_dir)), replace_on_change())


def load_snapshot(stack: str, root: Path = SNAPSHOT_DIR) -> dict[str, Any]:
    path = snapshot_path(stack, root)
    if not path.exists():
        raise FileNotFoundError(f"no URN snapshot {path} for stack {stack!r}: run `{UPDATE_HINT}`")
    return dict(json.loads(path.read_text()))


def write_snapshots(project_dir: Path = PROJECT_ROOT, root: Path = SNAPSHOT_DIR) -> list[Path]:
    """Regenerate every stack's snapshot (the explicit, reviewed step), removing stale ones."""
    root.mkdir(parents=True, exist_ok=True)
    stacks = stack_names(project_dir)
    for stale in root.glob("*.urns.json"):
        if stale.name.removesuffix(".urns.json") not in stacks:
            stale.unlink()
    written = []
    for stack in stacks:
        path = snapshot_path(stack, root)
        path.write_text(json.dumps(stack_snapshot(stack, project_dir), indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written


def check_stacks(project_dir: Path = PROJECT_ROOT, root: Path = SNAPSHOT_DIR) -> dict[str, list[Problem]]:
    """Every stack's problems against its committed snapshot."""
    facts = replace_on_change()
    return {
        stack: check(load_snapshot(stack, root), run_resources(read_stack(stack, project_dir)), facts)
        for stack in stack_names(project_dir)
    }
