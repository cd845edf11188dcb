"""routing.kind and autoscaling.signal router-queue: the scale-from-zero rules in both spellings
(stack config keys, the component's argument path), and routing.kind llm-d refused before anything
is created while this version does not render the router."""

from __future__ import annotations

from typing import Any

import pytest

from deepseek_eks.automation.mocks import RecordingMocks, run_with_mocks
from deepseek_eks.automation.render import run_stack_program
from deepseek_eks.components import DeepSeekService, build
from deepseek_eks.components.service import service_settings
from deepseek_eks.settings import PROJECT, SettingsError
from deepseek_eks.settings.pulumi_source import load_settings
from tests.conftest import stack_config


def test_the_component_names_both_settings_and_the_fix_in_its_argument_spelling() -> None:
    with pytest.raises(SettingsError) as error:
        service_settings({"autoscaling": {"min_replicas": 0, "signal": "queue-depth"}}, "dev", "chat")
    text = str(error.value)
    needs = 'autoscaling={"min_replicas": ...} = 0: 0 needs autoscaling={"signal": ...} router-queue and '
    assert needs in text
    assert 'routing={"kind": ...} llm-d' in text and "minReplicas" not in text and f"{PROJECT}:" not in text
    with pytest.raises(SettingsError) as error:
        service_settings({"autoscaling": {"signal": "router-queue"}}, "dev", "chat")
    text = str(error.value)
    needs = 'autoscaling={"signal": ...} = "router-queue": router-queue needs routing={"kind": ...} llm-d'
    assert needs in text
    settings = service_settings(
        {"autoscaling": {"min_replicas": 0, "signal": "router-queue"}, "routing": {"kind": "llm-d"}}, "dev"
    )
    assert (settings.autoscaling.min_replicas, settings.routing.kind) == (0, "llm-d")


def test_the_stack_program_refuses_llm_d_before_creating_anything() -> None:
    mocks = RecordingMocks()
    config = stack_config(
        "dev", routing__kind="llm-d", autoscaling__signal="router-queue", autoscaling__minReplicas="0"
    )
    with pytest.raises(Exception) as raised:
        run_stack_program(lambda: build(load_settings()).outputs, mocks, config)
    message = str(raised.value)
    assert f"{PROJECT}:routing.kind llm-d is not rendered by this version yet" in message
    assert "set routing.kind none" in message
    assert [r.type for r in mocks.resources if r.custom] == []


def test_a_component_refuses_llm_d_in_its_argument_spelling() -> None:
    mocks = RecordingMocks()

    def program() -> dict[str, Any]:
        DeepSeekService("team-a", {"routing": {"kind": "llm-d"}, "region": "us-east-1"})
        return {}

    with pytest.raises(Exception) as raised:
        run_with_mocks(program, mocks, project=PROJECT, stack="dev", config={}, secret_keys=[])
    message = str(raised.value)
    assert "DeepSeekService 'team-a'" in message
    assert 'routing={"kind": ...} llm-d is not rendered by this version yet' in message
    assert "routing.kind" not in message
    assert [r.type for r in mocks.resources if r.custom] == []


def test_routing_none_is_the_default_and_renders() -> None:
    mocks = RecordingMocks()
    config = stack_config("dev", routing__kind="none")
    run_stack_program(lambda: build(load_settings()).outputs, mocks, config)
    assert any(r.custom for r in mocks.resources)


def test_render_refuses_llm_d_as_a_settings_error_without_a_traceback(tmp_path) -> None:
    from tests.rendered.test_render import automation

    proc = automation("render", "--stack", "dev", "--set", "routing.kind=llm-d", "--out", str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"error: DeepSeekService 'deepseek': {PROJECT}:routing.kind llm-d is not rendered" in proc.stderr
