"""Upgrading a stack to DeepSeekService moves no resource: every URN the example stacks had before
(tests/data/urns_before_deepseek_service.json, recorded from the program that created the top-level
components at the root) is either still registered or covered by an alias of a new resource."""

from __future__ import annotations

import json

import pytest

from automation.stackfile import read_stack, stack_names
from tests.urn_aliases import SNAPSHOT, registrations

BEFORE = json.loads(SNAPSHOT.read_text())


def test_snapshot_covers_every_example_stack() -> None:
    assert set(BEFORE) == set(stack_names())


@pytest.mark.parametrize("stack", sorted(BEFORE))
def test_every_old_urn_is_kept_or_aliased(stack: str) -> None:
    regs = registrations(read_stack(stack))
    current = {r.urn for r in regs}
    aliased = set().union(*(r.alias_urns() for r in regs))
    lost = [u for u in BEFORE[stack] if u not in current and u not in aliased]
    assert not lost, f"{len(lost)} resources of stack {stack} would be replaced, e.g. {lost[:3]}"
    # The service itself is new; everything else moved under it.
    services = [r for r in regs if r.type == "deepseek-eks:index:DeepSeekService"]
    assert [s.name for s in services] == ["deepseek"]
    moved = [r for r in regs if r.parent is services[0]]
    assert moved and all(r.urn not in BEFORE[stack] for r in moved)


def test_without_the_aliases_the_cluster_would_be_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above is not vacuous: drop the aliases and the old URNs are lost."""
    import sys

    import pulumi

    from deepseek_eks.components.build import build_service

    monkeypatch.setattr(sys.modules[build_service.__module__], "WAS_AT_ROOT", pulumi.Alias(name="never-used"))
    regs = registrations(read_stack("dev"))
    covered = {r.urn for r in regs} | set().union(*(r.alias_urns() for r in regs))
    lost = [u for u in BEFORE["dev"] if u not in covered]
    assert any(u.endswith("::cluster") for u in lost)
