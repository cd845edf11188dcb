"""Upgrading a stack to DeepSeekService moves no resource: every URN the example stacks had before
(tests/data/urns_before_deepseek_service.json, recorded from the program that created the top-level
components at the root) is either still registered or covered by an alias of a new resource. The
URNs and aliases are the ones the recording mocks resolve as the engine does (deepseek_eks/testing/mocks.py),
the same the URN snapshot check (guardrails/urns.py) uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepseek_eks.automation.stackfile import read_stack, stack_names
from deepseek_eks.guardrails.urns import run_resources
from deepseek_eks.testing.mocks import Recorded

BEFORE = json.loads((Path(__file__).parents[1] / "data" / "urns_before_deepseek_service.json").read_text())


# The settings the example stacks had when those URNs were recorded, where they changed since: dev
# scaled with its own HPA then, and a change of signal removes that HPA on purpose (a settings
# change, not a move), so the move is checked at the recorded settings.
RECORDED_WITH = {"dev": {"autoscaling.signal": "gpu-utilization", "autoscaling.seasonal": "false"}}


def recorded_stack(stack: str):
    """The example stack at the settings its URNs were recorded with."""
    return read_stack(stack).with_overrides(RECORDED_WITH.get(stack, {}), "deepseek-eks")


def lost_urns(stack: str, resources: list[Recorded]) -> list[str]:
    """Old URNs neither registered nor aliased (the root stack resource is always there)."""
    covered = {r.urn for r in resources}.union(*(r.aliases for r in resources))
    return [u for u in BEFORE[stack] if u not in covered and "::pulumi:pulumi:Stack::" not in u]


def test_snapshot_covers_every_example_stack() -> None:
    assert set(BEFORE) == set(stack_names())


@pytest.mark.parametrize("stack", sorted(BEFORE))
def test_every_old_urn_is_kept_or_aliased(stack: str) -> None:
    resources = run_resources(recorded_stack(stack))
    lost = lost_urns(stack, resources)
    assert not lost, f"{len(lost)} resources of stack {stack} would be replaced, e.g. {lost[:3]}"
    # The service itself is new; everything else moved under it.
    services = [r for r in resources if r.type == "deepseek-eks:index:DeepSeekService"]
    assert [s.name for s in services] == ["deepseek"]
    moved = [r for r in resources if r.parent == services[0].urn]
    assert moved and all(r.urn not in BEFORE[stack] for r in moved)


def test_without_the_aliases_the_cluster_would_be_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above is not vacuous: drop the aliases and the old URNs are lost."""
    import sys

    import pulumi

    from deepseek_eks.components.build import build_service

    monkeypatch.setattr(sys.modules[build_service.__module__], "WAS_AT_ROOT", pulumi.Alias(name="never-used"))
    lost = lost_urns("dev", run_resources(recorded_stack("dev")))
    assert any(u.endswith("::cluster") for u in lost)
