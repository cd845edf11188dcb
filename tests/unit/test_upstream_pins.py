"""Pins and node facts checked against what upstream released (reference/upstream)."""

from __future__ import annotations

import re

import pytest

from deepseek_eks.components import versions
from deepseek_eks.settings.model import SUPPORTED_KUBERNETES_VERSIONS
from deepseek_eks.sizing import instance_catalog
from deepseek_eks.sizing.nodes import ENI_LIMITS, eni_limited_pods, kube_reserved_memory_mib
from tests.upstream import eks_ami_release_tags
from tests.upstream_platform import al2023_images, eks_chart_versions, platform_facts
from tests.upstream_platform import eni_limited_pods as upstream_eni_limited_pods

ALIAS = re.compile(r"al2023@(v\d{8})")


def pinned_ami_releases() -> set[str]:
    """Every al2023@vYYYYMMDD the versions module holds, whatever the constant is called."""
    found = set()
    for value in vars(versions).values():
        if isinstance(value, str):
            found.update(ALIAS.findall(value))
    return found


def test_versions_pin_at_least_one_ami_release() -> None:
    assert pinned_ami_releases()


@pytest.mark.parametrize("release", sorted(pinned_ami_releases()))
def test_pinned_ami_release_exists_and_covers_every_supported_kubernetes(release: str) -> None:
    assert release in eks_ami_release_tags()
    images = al2023_images()[release]
    for minor in SUPPORTED_KUBERNETES_VERSIONS:
        # GPU nodes resolve the NVIDIA variant, the general pool the standard one (x86_64 only).
        assert minor in images["x86_64-nvidia"], (release, minor)
        assert minor in images["x86_64-standard"], (release, minor)


@pytest.mark.parametrize("pin", [versions.AWS_LOAD_BALANCER_CONTROLLER], ids=lambda p: p.chart)
def test_eks_chart_pins_are_the_released_charts(pin: versions.ChartPin) -> None:
    assert pin.repository == "https://aws.github.io/eks-charts"
    assert pin.version == eks_chart_versions()[pin.chart]["version"]


@pytest.mark.parametrize("name", sorted(instance_catalog().instances))
def test_eni_limited_pods_match_karpenters_vpc_limits(name: str) -> None:
    assert name in ENI_LIMITS
    assert eni_limited_pods(name) == upstream_eni_limited_pods(name)


def test_kube_reserved_memory_is_karpenters_formula_over_eni_limited_pods() -> None:
    facts = platform_facts()["karpenter"]["kube_reserved_memory_mib"]
    for name in ("g6.xlarge", "g6e.12xlarge", "p5.48xlarge"):
        expected = facts["base"] + facts["per_pod"] * upstream_eni_limited_pods(name)
        assert kube_reserved_memory_mib(name) == expected
    # Not kubelet's default of 110 pods: a 12xlarge reserves for hundreds of pods.
    assert kube_reserved_memory_mib("g6e.12xlarge") > facts["base"] + facts["per_pod"] * 110


def test_unknown_instance_type_names_the_table_to_extend() -> None:
    with pytest.raises(ValueError, match="ENI_LIMITS"):
        eni_limited_pods("g7.xlarge")
