"""Where GPU nodes pull the vLLM image from (image.registry), and what each source gets in IAM,
checked against reference/upstream/image-pulls.json and Karpenter's CloudFormation snapshot."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks.automation.api import read_config
from deepseek_eks.automation.render import Rendered, render
from deepseek_eks.components import versions
from deepseek_eks.components.platform.iam_policies import assert_least_privilege, pull_through_cache_policy
from deepseek_eks.components.platform.karpenter import NODE_POLICIES
from deepseek_eks.settings import SettingsError, parse_settings

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "reference" / "upstream"
FACTS = json.loads((UPSTREAM / "image-pulls.json").read_text())
P = "deepseek-eks:"
CACHE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/docker-hub"


def test_anonymous_docker_hub_pulls_warn_with_dockers_documented_limit() -> None:
    limit = FACTS["docker_hub_unauthenticated_limit"]
    (warning,) = [w for w in parse_settings({}).warnings if "image.registry" in w]
    assert f"{limit['pulls']} pulls per {limit['window_hours']} hours" in warning
    assert str(limit["over_limit_status"]) in warning and f"{P}image.registry" in warning
    assert not [w for w in parse_settings({f"{P}image.registry": CACHE}).warnings if "image.registry" in w]


def test_a_registry_that_is_not_one_is_refused_by_its_key() -> None:
    with pytest.raises(SettingsError) as info:
        parse_settings({f"{P}image.registry": "https://Mirror.example.com/"})
    assert f"{P}image.registry" in str(info.value)


def test_the_image_keeps_docker_hubs_path_under_the_registry_and_names_a_digest_when_known() -> None:
    image = versions.VLLM_IMAGE
    assert versions.image_reference(image) == image
    assert versions.image_reference(image, CACHE + "/") == f"{CACHE}/{image}"
    assert versions.image_reference(f"docker.io/{image}", "mirror.example.com:5000") == (
        f"mirror.example.com:5000/{image}"
    )
    digest = "sha256:" + "0" * 64
    assert versions.image_reference(image, None, digest) == f"{image}@{digest}"
    # No digest of the pinned tag could be sourced offline (image-pulls.json says why).
    assert FACTS["vllm_image_digest"]["digest"] == versions.VLLM_IMAGE_DIGEST
    assert FACTS["vllm_image_digest"]["image"] == image


@cache
def _render(stack: str, registry: str | None) -> Rendered:
    return render(read_config(stack, {"image.registry": registry} if registry else {}))


def _containers(rendered: Rendered) -> list[dict[str, Any]]:
    found = []
    for obj in rendered.objects():
        if obj["kind"] in ("Deployment", "Job"):
            found += obj["spec"]["template"]["spec"]["containers"]
        if obj["kind"] == "LeaderWorkerSet":
            templates = obj["spec"]["leaderWorkerTemplate"]
            for key in ("leaderTemplate", "workerTemplate"):
                found += templates[key]["spec"]["containers"]
    return found


def _pull_through_policies(rendered: Rendered) -> list[dict[str, Any]]:
    return [
        r
        for r in rendered.aws
        if r["type"] == "aws:iam/rolePolicy:RolePolicy" and "ecr:" in r["inputs"]["policy"]
    ]


@pytest.mark.parametrize("stack", ["dev", "prod"])  # auto-mode and karpenter
def test_an_ecr_pull_through_cache_is_pulled_from_with_its_documented_permissions(stack: str) -> None:
    rendered = _render(stack, CACHE)
    images = {c["image"] for c in _containers(rendered) if "vllm-openai" in c["image"]}
    assert images == {f"{CACHE}/{versions.VLLM_IMAGE}"}
    (policy,) = _pull_through_policies(rendered)
    (statement,) = json.loads(policy["inputs"]["policy"])["Statement"]
    assert set(statement["Action"]) == set(FACTS["ecr_pull_through_cache_permissions"]["actions"])
    assert statement["Resource"] == "arn:aws:ecr:us-east-1:123456789012:repository/docker-hub/*"
    assert policy["inputs"]["role"]  # the node role of that mode


def test_docker_hub_and_other_mirrors_get_no_ecr_permissions() -> None:
    assert not _pull_through_policies(_render("prod", None))
    assert not _pull_through_policies(_render("prod", "mirror.example.com/hub"))
    images = {c["image"] for c in _containers(_render("prod", "mirror.example.com/hub"))}
    assert f"mirror.example.com/hub/{versions.VLLM_IMAGE}" in images


def test_the_pull_through_policy_is_least_privilege_and_scoped_to_the_prefix() -> None:
    policy = pull_through_cache_policy(
        partition="aws", region="eu-west-1", account="123456789012", prefix="hub"
    )
    assert assert_least_privilege(policy) == []
    assert policy["Statement"][0]["Resource"] == "arn:aws:ecr:eu-west-1:123456789012:repository/hub/*"
    with pytest.raises(ValueError, match="prefix"):
        pull_through_cache_policy(partition="aws", region="eu-west-1", account="123456789012", prefix="*")


def test_karpenter_nodes_get_ecr_pull_only_access_as_karpenters_cloudformation_does() -> None:
    text = (UPSTREAM / "karpenter-1.14-cloudformation.yaml").read_text()
    # The node role is the template's first resource; its block ends where the next one starts.
    node_role = text.split("  KarpenterNodeRole:", 1)[1].split("\n  NodeLifecyclePolicy:", 1)[0]
    upstream = set(re.findall(r"iam::aws:policy/(AmazonEC2ContainerRegistry\w+)", node_role))
    ours = {p for p in NODE_POLICIES if "ContainerRegistry" in p}
    assert ours == upstream == {"AmazonEC2ContainerRegistryPullOnly"}
    # ReadOnly lists and describes repositories too, beyond what a pull needs.
    read_only = set(FACTS["ecr_read_only_policy_actions"]["actions"])
    assert set(FACTS["ecr_pull_only_policy"]["actions_read"]) < read_only


def test_the_pull_policy_skip_states_the_reason_docker_hub_gives() -> None:
    """Issue 37 §3: CKV_K8S_15's reason was wrong (Always does not re-download a cached image). The
    reason that holds: Docker Hub counts the version check of every pull as a pull."""
    import json

    from deepseek_eks.components.serving.vllm import CHECKOV_SKIPS
    from tests.upstream import UPSTREAM

    fact = json.loads((UPSTREAM / "image-pulls.json").read_text())["docker_hub_pull_definition"]
    assert "version check" in fact["statement"]
    reason = CHECKOV_SKIPS["CKV_K8S_15"]
    assert "counts as a pull" in reason and "re-pulls" not in reason
