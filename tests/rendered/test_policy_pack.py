"""Every policy rule over the full offline render of every example stack: zero violations; and a
stack made unsafe on purpose fails with each rule's message."""

from __future__ import annotations

import importlib

import pytest

import deepseek_eks.components.platform.nodepools
import deepseek_eks.components.serving.vllm  # noqa: F401
from deepseek_eks import components
from deepseek_eks.automation.render import _prune, construct, unwrap_secrets
from deepseek_eks.automation.stackfile import StackConfig, read_stack, stack_names
from deepseek_eks.policy.rules import RESOURCE_RULES, STACK_RULES, Resource, violations
from deepseek_eks.testing.mocks import Recorded
from tests.conftest import routed_configs, stack_config

# The module itself: ``components.build`` is the package's build() function.
BUILD = importlib.import_module("deepseek_eks.components.build")


def policy_view(records: list[Recorded]) -> list[Resource]:
    """What the policy engine would see of each registered resource: type token, inputs (secrets
    masked), URN and the resources each input depends on."""
    return [
        Resource(r.type, _prune(unwrap_secrets(r.inputs)), r.urn, r.name, r.dependencies, r.parent)
        for r in records
    ]


def stack_violations(config: StackConfig) -> list[tuple[str, str, str]]:
    return violations(policy_view(construct(config).mocks.resources))


@pytest.mark.parametrize("stack", [*stack_names(), *routed_configs()])
def test_every_example_stack_passes_every_rule(stack: str) -> None:
    config = routed_configs()[stack] if stack in routed_configs() else read_stack(stack)
    resources = policy_view(construct(config).mocks.resources)
    # The rules did look at something: each stack has the kinds they guard.
    assert {"eks:index:Cluster", "kubernetes:karpenter.sh/v1:NodePool"} <= {r.type for r in resources}
    assert violations(resources) == []


def test_a_stack_made_unsafe_fails_with_each_rules_message(monkeypatch: pytest.MonkeyPatch) -> None:
    # The stack composes the image reference (image.registry, digest) from this pin (components/build.py).
    monkeypatch.setattr(BUILD, "VLLM_IMAGE", "vllm/vllm-openai:latest")
    monkeypatch.setattr(
        components.platform.nodepools,
        "GPU_EXPIRE_AFTER",
        dict.fromkeys(components.platform.nodepools.GPU_EXPIRE_AFTER, "720h"),
    )
    # The settings refuse a world-open, plain-HTTP or keyless public endpoint (settings/exposure.py),
    # so the pack, which also guards programs that bypass them, is shown one made so by hand: the
    # public stack's Ingress opened to the world and its TLS and key taken away.
    public = stack_config(
        "prod",
        endpoint__scheme="internet-facing",
        endpoint__allowedCidrs="198.51.100.0/24",
        endpoint__certificateArn="arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1234",
    )
    resources = policy_view(construct(public).mocks.resources)
    for resource in resources:
        if resource.type == "kubernetes:networking.k8s.io/v1:Ingress":
            annotations = resource.props["metadata"]["annotations"]
            annotations["alb.ingress.kubernetes.io/inbound-cidrs"] = "0.0.0.0/0"
            annotations["alb.ingress.kubernetes.io/listen-ports"] = '[{"HTTP": 80}]'
            for key in ("certificate-arn", "ssl-redirect", "ssl-policy"):
                annotations.pop(f"alb.ingress.kubernetes.io/{key}", None)
        if resource.type == "kubernetes:apps/v1:Deployment" and resource.props["metadata"]["name"] == "vllm":
            for container in resource.props["spec"]["template"]["spec"]["containers"]:
                container["env"] = [e for e in container.get("env", []) if e["name"] != "VLLM_API_KEY"]
    found = violations(resources)
    by_rule: dict[str, list[str]] = {}
    for rule, _, message in found:
        by_rule.setdefault(rule, []).append(message)

    assert by_rule.keys() == {
        "endpoint-not-open-to-world",
        "pinned-versions",
        "gpu-nodepool-guarded",
        "api-key-when-exposed",
        "tls-when-exposed",
    }
    [plain] = by_rule["tls-when-exposed"]
    assert plain == (
        "Ingress deepseek/vllm is internet-facing and serves plain HTTP only: set endpoint.certificateArn "
        "(an ACM certificate)"
    )
    [world] = by_rule["endpoint-not-open-to-world"]
    assert world == (
        "Ingress deepseek/vllm is internet-facing and alb.ingress.kubernetes.io/inbound-cidrs admits the "
        "whole internet (0.0.0.0/0 together admit 100% of IPv4's public addresses (the world-open line "
        "is 1/16 of them, 6.25 %))"
    )
    assert any(
        "'vllm/vllm-openai:latest' uses the mutable tag latest" in m for m in by_rule["pinned-versions"]
    )
    expiring = by_rule["gpu-nodepool-guarded"]
    assert expiring and all("spec.template.spec.expireAfter '720h'" in m for m in expiring)
    assert "takes requests without an API key" in by_rule["api-key-when-exposed"][0]


def test_the_rules_cover_every_promise_of_the_issue() -> None:
    names = {r.name for r in (*RESOURCE_RULES, *STACK_RULES)}
    assert names == {
        "endpoint-not-open-to-world",
        "cluster-endpoint-private-or-limited",
        "imdsv2-hop-limit-1",
        "pinned-versions",
        "gpu-nodepool-guarded",
        "encrypted-volumes",
        "s3-encrypted-tls-only",
        "no-wildcard-iam",
        "no-plaintext-secrets",
        "api-key-when-exposed",
        "tls-when-exposed",
        "class-endpoint-not-open-to-world",
        "s3-not-public",
        "no-world-open-ingress",
        "no-world-open-ingress-sets",
        "no-host-access",
        "rbac-least-privilege",
        "container-least-privilege",
    }
