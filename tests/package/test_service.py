"""DeepSeekService from typed args: the same validation as the stack settings, the same resources,
outputs as attributes with secrets kept secret."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from automation.mocks import RecordingMocks, run_with_mocks
from deepseek_eks.components import DeepSeekService, DeepSeekServiceArgs
from deepseek_eks.components.service import (
    PLACEMENT_KEYS,
    GpuArgs,
    ModelArgs,
    ScalingArgs,
    camel,
    service_settings,
)
from deepseek_eks.settings import PROJECT, Settings, SettingsError
from deepseek_eks.settings.model import _GROUPS
from tests.conftest import stack_config

PROD_AS_ARGS: DeepSeekServiceArgs = {
    "region": "us-east-1",
    "compute_mode": "karpenter",
    "model": ModelArgs(variant="r1-distill-llama-70b", max_model_len=32768, min_full_length_sequences=2),
    "gpu": GpuArgs(instance_families=["g6e", "p5"], capacity_types=["spot", "on-demand"]),
    "autoscaling": ScalingArgs(signal="combined", min_replicas=1, max_replicas=4, queue_depth_per_replica=8),
    "api_key": "not-a-real-key",
}


def run_service(args: DeepSeekServiceArgs, stack: str = "prod") -> tuple[RecordingMocks, dict[str, Any]]:
    mocks = RecordingMocks(region="us-east-1")
    outputs: dict[str, Any] = {}

    def program() -> dict[str, Any]:
        service = DeepSeekService("deepseek", args)
        outputs.update({name: getattr(service, name) for name in DeepSeekService.__annotations__})
        return outputs

    resolved = run_with_mocks(program, mocks, project=PROJECT, stack=stack, config={}, secret_keys=[])
    return mocks, resolved


@pytest.mark.parametrize("group", sorted(_GROUPS))
def test_args_have_every_setting_of_each_group(group: str) -> None:
    """The typed args cannot drift from the settings model: same fields, in snake_case."""
    args_type = DeepSeekServiceArgs.__annotations__[group]
    assert set(args_type.__annotations__) == set(_GROUPS[group].model_fields)


def test_top_level_args_are_the_settings_fields() -> None:
    settings_fields = set(Settings.model_fields) - {"stack", "warnings"}
    assert set(DeepSeekServiceArgs.__annotations__) - set(PLACEMENT_KEYS) == settings_fields


def test_bad_args_are_all_reported_at_once_by_config_key() -> None:
    with pytest.raises(SettingsError) as error:
        service_settings(
            {
                "model": {"max_model_len": 10, "variant": "r2"},
                "autoscaling": {"signal": "vibes"},
                "compute_mode": "fargate",
                "colour": "blue",  # type: ignore[typeddict-unknown-key]
            },
            "dev",
        )
    text = str(error.value)
    for key in ("model.maxModelLen", "model.variant", "autoscaling.signal", "computeMode", "colour"):
        assert f"{PROJECT}:{key}" in text, key


def test_args_render_what_the_equivalent_stack_config_renders(construct) -> None:
    """prod's stack file as args: the same resources with the same inputs, and the same outputs."""
    mocks, outputs = run_service(PROD_AS_ARGS)
    stack = construct(stack_config("prod", secrets={"apiKey": "not-a-real-key"}))

    def inputs(m: RecordingMocks) -> dict[tuple[str, str], Any]:
        return {(r.type, r.name): r.inputs for r in m.resources}

    assert inputs(mocks) == inputs(stack.mocks)
    for key, value in stack.outputs.items():
        assert outputs[_snake(key)] == value, key


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def test_secrets_stay_secret() -> None:
    _, outputs = run_service(PROD_AS_ARGS)
    assert outputs["kubeconfig"] == outputs["grafana_admin_password"] == "[secret]"
    assert outputs["curl"] != "[secret]" and "not-a-real-key" not in outputs["curl"]


def test_camel_is_the_config_spelling() -> None:
    assert camel("min_full_length_sequences") == "minFullLengthSequences"
    assert camel("grafana") == "grafana"


def test_args_and_settings_together_are_refused() -> None:
    def program() -> dict[str, Any]:
        DeepSeekService("x", {"compute_mode": "karpenter"}, settings=Settings())
        return {}

    with pytest.raises(Exception, match="either args or settings"):
        run_with_mocks(program, RecordingMocks(), project=PROJECT, stack="dev", config={}, secret_keys=[])


def _joining(args: DeepSeekServiceArgs, with_provider: bool = True) -> None:
    import pulumi_kubernetes as k8s

    def program() -> dict[str, Any]:
        opts = None
        if with_provider:
            provider = k8s.Provider("existing", kubeconfig="{}")
            opts = pulumi.ResourceOptions(providers={"kubernetes": provider})
        DeepSeekService("team-a", args, opts)
        return {}

    run_with_mocks(program, RecordingMocks(), project=PROJECT, stack="dev", config={}, secret_keys=[])


JOIN: DeepSeekServiceArgs = {
    "existing_cluster": {"cluster_name": "platform"},
    "autoscaling": {"signal": "queue-depth"},
    "network": {
        "vpc_id": "vpc-0a1b2c3d4e5f60718",
        "private_subnet_ids": ["subnet-0a1b2c3d", "subnet-0b1b2c3d"],
    },
}


def test_joining_needs_the_clusters_kubernetes_provider() -> None:
    with pytest.raises(Exception, match="Kubernetes provider as this component's provider"):
        _joining(JOIN, with_provider=False)


def test_joining_needs_the_clusters_vpc() -> None:
    with pytest.raises(Exception, match=r"set network.vpc_id and network.private_subnet_ids"):
        _joining({"existing_cluster": {"cluster_name": "platform"}, "autoscaling": {"signal": "queue-depth"}})


def test_karpenter_mode_cannot_join_a_cluster() -> None:
    with pytest.raises(Exception, match="only computeMode auto-mode can join"):
        _joining({**JOIN, "compute_mode": "karpenter"})


def test_a_service_without_shared_addons_cannot_scale_on_the_adapter() -> None:
    with pytest.raises(Exception, match="gpu-utilization needs this service's prometheus-adapter rule"):
        _joining({**JOIN, "autoscaling": {"signal": "gpu-utilization"}})


def test_aws_provider_args_reach_the_settings() -> None:
    role = "arn:aws:iam::123456789012:role/deployer"
    settings = service_settings(
        {
            "region": "eu-west-1",
            "aws": {
                "profile": "platform",
                "assume_roles": [{"role_arn": role, "session_name": "deepseek"}],
                "allowed_account_ids": ["123456789012"],
            },
        },
        "dev",
    )
    assert settings.region == "eu-west-1"
    assert settings.aws.profile == "platform"
    assert [(r.role_arn, r.session_name) for r in settings.aws.assume_roles] == [(role, "deepseek")]
    assert settings.aws.allowed_account_ids == ["123456789012"]
