"""build() under Pulumi's mock engine: which children exist, with which inputs and parents."""

from __future__ import annotations

import pytest

from deepseek_eks.testing.mocks import RecordingMocks, UnmockedError
from tests.conftest import stack_config


def test_namespaces_and_pod_security(construct) -> None:
    run = construct(stack_config("dev"))
    namespaces = {r.inputs["metadata"]["name"]: r for r in run.mocks.of_type("kubernetes:core/v1:Namespace")}
    assert set(namespaces) == {"deepseek", "monitoring", "node-monitoring"}
    enforce = {
        name: ns.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
        for name, ns in namespaces.items()
    }
    assert enforce == {"deepseek": "restricted", "monitoring": "baseline", "node-monitoring": "privileged"}
    host = namespaces["node-monitoring"].inputs["metadata"]
    assert "dcgm-exporter" in host["annotations"]["deepseek-eks/pod-security-reason"]


def test_children_are_named_from_their_component(construct) -> None:
    run = construct(stack_config("dev"))
    names = {r.name for r in run.mocks.resources}
    assert {"namespaces", "namespaces-deepseek", "namespaces-monitoring"} <= names
    assert "api-secrets" in names


def test_a_generated_key_and_no_token_when_none_configured(construct) -> None:
    run = construct(stack_config("dev"))
    names = {r.inputs["metadata"]["name"] for r in run.mocks.of_type("kubernetes:core/v1:Secret")}
    assert names == {"grafana-admin", "vllm-api-key"}  # both generated (endpoint.auth api-key)
    run = construct(stack_config("dev", endpoint__auth="none"))
    names = {r.inputs["metadata"]["name"] for r in run.mocks.of_type("kubernetes:core/v1:Secret")}
    assert names == {"grafana-admin"}


def test_secrets_are_created_from_pulumi_secrets(construct) -> None:
    run = construct(stack_config("dev", secrets={"hfToken": "hf_abc", "apiKey": "sk-123"}))
    secrets = {r.inputs["metadata"]["name"]: r for r in run.mocks.of_type("kubernetes:core/v1:Secret")}
    assert set(secrets) == {"hf-token", "vllm-api-key", "grafana-admin"}
    for name, key in (("hf-token", "token"), ("vllm-api-key", "api-key")):
        secret = secrets[name]
        assert secret.inputs["metadata"]["namespace"] == "deepseek"
        # The value reaches the engine wrapped as a secret, never as a plain string.
        string_data = secret.inputs["stringData"]
        assert isinstance(string_data, dict) and "value" in string_data
        assert key in string_data["value"]


def test_outputs_export_the_plan(construct) -> None:
    run = construct(stack_config("prod"))
    assert run.outputs["computeMode"] == "karpenter"
    assert run.outputs["variant"] == "r1-distill-llama-70b"
    assert run.outputs["plan"]["instance_type"] == run.outputs["instanceType"] == "g6e.12xlarge"
    assert run.outputs["plan"] == run.result.plan.to_dict()
    assert run.outputs["inferenceNamespace"] == "deepseek"


def test_labels_name_stack_and_variant(construct) -> None:
    run = construct(stack_config("dev", model__variant="r1-distill-llama-8b"))
    for ns in run.mocks.of_type("kubernetes:core/v1:Namespace"):
        labels = ns.inputs["metadata"]["labels"]
        assert labels["deepseek-eks/stack"] == "dev"
        assert labels["deepseek-eks/variant"] == "r1-distill-llama-8b"


def test_strict_mocks_refuse_unknown_types_and_invokes() -> None:
    from pulumi.runtime import MockCallArgs, MockResourceArgs

    mocks = RecordingMocks()
    with pytest.raises(UnmockedError, match="no mock for resource type 'aws:rds/instance:Instance'"):
        mocks.new_resource(MockResourceArgs("aws:rds/instance:Instance", "db", {}, None, None, True))
    with pytest.raises(UnmockedError, match="no mock for invoke 'aws:index/getRegion:getRegion'"):
        mocks.call(MockCallArgs("aws:index/getRegion:getRegion", {}, None))
