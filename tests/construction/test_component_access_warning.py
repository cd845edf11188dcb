"""A component that creates its own cluster warns when nothing could reach that cluster's API
(issue 32 §3), as the stack program refuses it; with an access setting, or on your own cluster,
it does not. The README's and docs' component examples carry the access setting."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pulumi
import pytest

from deepseek_eks.components import DeepSeekService
from deepseek_eks.settings import PROJECT
from deepseek_eks.testing.mocks import RecordingMocks, run_with_mocks

ROOT = Path(__file__).resolve().parents[2]
ARGS: dict[str, Any] = {"region": "us-east-1", "model": {"variant": "r1-distill-qwen-7b"}}


def warnings_of(args: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    said: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: said.append(str(message)))

    def program() -> dict[str, Any]:
        DeepSeekService("chat", args)  # type: ignore[arg-type]
        return {}

    run_with_mocks(program, RecordingMocks(), project=PROJECT, stack="dev", config={}, secret_keys=[])
    return [w for w in said if "Kubernetes API" in w]


def test_a_cluster_nobody_can_reach_is_warned_in_the_argument_spelling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (warning,) = warnings_of(ARGS, monkeypatch)
    assert "DeepSeekService 'chat'" in warning and 'cluster={"public_access_cidrs"' in warning


def test_an_access_setting_silences_it(monkeypatch: pytest.MonkeyPatch) -> None:
    args = {**ARGS, "cluster": {"public_access_cidrs": ["203.0.113.7/32"]}}
    assert warnings_of(args, monkeypatch) == []


@pytest.mark.parametrize("page", ["README.md", "docs/component.md"])
def test_the_component_examples_name_who_may_reach_the_api(page: str) -> None:
    text = (ROOT / page).read_text()
    example = text[text.index("svc = DeepSeekService(") :]
    example = example[: example.index("```")]
    assert re.search(r'cluster=\{"public_access_cidrs": \[', example), example


def test_a_missing_region_does_not_hide_the_other_problems(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32 §3: without a region the other argument problems are still reported, at once."""
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)

    def program() -> dict[str, Any]:
        DeepSeekService("chat", {"autoscaling": {"max_replicas": -1}})  # type: ignore[typeddict-item]
        return {}

    with pytest.raises(Exception) as raised:
        run_with_mocks(program, RecordingMocks(), project=PROJECT, stack="dev", config={}, secret_keys=[])
    message = str(raised.value)
    assert "region" in message and "max_replicas" in message, message


def test_the_settings_warnings_reach_a_component_user_once_in_the_argument_spelling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A setting that is valid but risky warns the stack program's user (settings/pulumi_source.py);
    a component's user gets the same warnings, each once, naming the argument they wrote."""
    said: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: said.append(str(message)))
    args = {**ARGS, "cluster": {"public_access_cidrs": ["203.0.113.7/32"]}}

    def program() -> dict[str, Any]:
        DeepSeekService("chat", {**args, "autoscaling": {"target_gpu_utilization": 1}})  # type: ignore[arg-type]
        return {}

    run_with_mocks(program, RecordingMocks(), project=PROJECT, stack="dev", config={}, secret_keys=[])
    registry = [w for w in said if 'image={"registry": ...}' in w]
    target = [w for w in said if 'autoscaling={"target_gpu_utilization": ...}' in w]
    assert len(registry) == 1 and len(target) == 1, said
    assert all(w.startswith("DeepSeekService 'chat': ") for w in registry + target)
    assert not any(f"{PROJECT}:" in w for w in registry + target)
