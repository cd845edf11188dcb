"""The program itself refuses an in-place computeMode switch (issue 31 §3): the service reads its
own outputs from the stack's last update (the engine's readStackResourceOutputs, answered here by
the mocks as the engine answers it) and refuses before anything is created, for the stack program
(config-key spelling) and for another program's component (argument spelling), unless
cluster.allowComputeModeSwitch says the migration is deliberate."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from deepseek_eks.automation.render import run_stack_program
from deepseek_eks.components import DeepSeekService, build
from deepseek_eks.components.deployed_state import READ_STACK_RESOURCE_OUTPUTS
from deepseek_eks.components.service import PROGRAM_SERVICE_NAME, TYPE
from deepseek_eks.settings import PROJECT
from deepseek_eks.settings.pulumi_source import load_settings
from deepseek_eks.testing.mocks import RecordingMocks, run_with_mocks
from tests.conftest import stack_config
from tests.package.test_service import PROD_AS_ARGS as PROD


def previous(stack: str, name: str, mode: str, parent: str = "") -> dict[str, dict[str, Any]]:
    """The stack's last update as the engine returns it: URN -> {type, outputs}."""
    qualified = f"{parent}${TYPE}" if parent else TYPE
    urn = f"urn:pulumi:{stack}::{PROJECT}::{qualified}::{name}"
    unrelated = f"urn:pulumi:{stack}::{PROJECT}::{TYPE}::someone-else"
    other = "karpenter" if mode == "auto-mode" else "auto-mode"
    return {
        urn: {"type": TYPE, "outputs": {"computeMode": mode, "clusterName": f"deepseek-{stack}"}},
        unrelated: {"type": TYPE, "outputs": {"computeMode": other}},
    }


def run_program(mocks: RecordingMocks, **overrides: str) -> None:
    config = stack_config("dev", **overrides)  # dev: computeMode auto-mode
    run_stack_program(lambda: build(load_settings()).outputs, mocks, config)


def test_the_stack_program_refuses_a_switch_before_creating_anything() -> None:
    mocks = RecordingMocks(previous=previous("dev", PROGRAM_SERVICE_NAME, "auto-mode"))
    with pytest.raises(Exception) as raised:
        run_program(mocks, computeMode="karpenter")
    message = str(raised.value)
    assert f"{PROJECT}:computeMode is 'karpenter'" in message and "deployed with 'auto-mode'" in message
    assert "terminates every Auto Mode node" in message and "new stack" in message
    assert f"{PROJECT}:cluster.allowComputeModeSwitch true" in message
    assert [r.type for r in mocks.resources if r.custom] == []  # nothing reached a provider
    (asked,) = [i for i in mocks.invokes if i.token == READ_STACK_RESOURCE_OUTPUTS]
    assert asked.args["stackName"].endswith(f"/{PROJECT}/dev")


def test_the_same_mode_and_a_first_deployment_go_ahead() -> None:
    same = RecordingMocks(previous=previous("dev", PROGRAM_SERVICE_NAME, "auto-mode"))
    run_program(same)
    assert any(r.custom for r in same.resources)
    first = RecordingMocks()  # no previous update
    run_program(first, computeMode="karpenter")
    assert any(r.custom for r in first.resources)


def test_a_deliberate_migration_goes_ahead_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: warnings.append(message))
    mocks = RecordingMocks(previous=previous("dev", PROGRAM_SERVICE_NAME, "auto-mode"))
    run_program(mocks, computeMode="karpenter", cluster__allowComputeModeSwitch="true")
    assert any(r.custom for r in mocks.resources)
    assert any("switching compute mode as allowed" in w for w in warnings), warnings


def test_a_component_in_another_program_refuses_in_its_argument_spelling() -> None:
    """PROD's args use karpenter; the component named team-a was deployed with auto-mode."""
    mocks = RecordingMocks(previous=previous("prod", "team-a", "auto-mode"))

    def program() -> dict[str, Any]:
        DeepSeekService("team-a", PROD)
        return {}

    with pytest.raises(Exception) as raised:
        run_with_mocks(program, mocks, project=PROJECT, stack="prod", config={}, secret_keys=[])
    message = str(raised.value)
    assert "DeepSeekService 'team-a'" in message and "compute_mode is 'karpenter'" in message
    assert 'cluster={"allow_compute_mode_switch": True}' in message
    assert [r.type for r in mocks.resources if r.custom] == []
